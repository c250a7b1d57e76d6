Bpresent_stateJ@m¤z?£
>Y#2¿pâ?cô‰?«Ò?k®’?mÓw>bdž½R!¦¿Cë>’å.¿~MÂ¾g#Ü¾xƒ?…¿