Bs0J
K¿RXv>