"""What the reference scripts share: the input embeddings of the seed notebooks.

Imported by seeds.py (the presets) and layers/testdata/torch_cases.py (the
layer tests' PyTorch cases), which replay the notebooks on these inputs.
"""

import torch

# "Your journey starts with one step": the six 3-d embeddings of notebooks 000, 003, 004.
JOURNEY = torch.tensor([
    [0.43, 0.15, 0.89],
    [0.55, 0.87, 0.66],
    [0.57, 0.85, 0.64],
    [0.22, 0.58, 0.33],
    [0.77, 0.25, 0.10],
    [0.05, 0.80, 0.55],
])

# "This is an example sentence": the five 3-d embeddings of notebook 001.
SENTENCE = torch.tensor([
    [0.5341, 0.3316, 0.5995],
    [0.9891, 0.8921, 0.4602],
    [0.1234, 0.5678, 0.9101],
    [0.4567, 0.7890, 0.1234],
    [0.2345, 0.6789, 0.3456],
])
