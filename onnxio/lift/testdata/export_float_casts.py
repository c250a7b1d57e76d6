#!/usr/bin/python3
"""Exports self-attention that casts its float32 scores and weights to
float32, as Megatron's attention does (.float() on the scores before the
softmax and on the weights after it, written as no-op Casts by the exporter),
for the lifting tests: a Cast from a type to itself is a copy.

Usage, from the repository root (Debian's python3-torch and python3-onnx):

    /usr/bin/python3 onnxio/lift/testdata/export_float_casts.py

writes onnxio/lift/testdata/float_casts/model.onnx (opset 13, input x
(2, 5, 8)) with test_data_set_0 (PyTorch's output).
"""

import math
import os
import shutil

import onnx
import torch
from onnx import numpy_helper
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
B, T, D, HEADS = 2, 5, 8, 2
HD = D // HEADS


class CastAttention(nn.Module):
    """Multi-head self-attention with Megatron's .float() around the softmax."""

    def __init__(self):
        super().__init__()
        self.query, self.key, self.value, self.dense = (nn.Linear(D, D) for _ in range(4))

    def forward(self, x):
        def heads(t):
            return t.view(B, T, HEADS, HD).permute(0, 2, 1, 3)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        scores = (q @ k.transpose(-1, -2) / math.sqrt(HD)).float()
        y = torch.softmax(scores, dim=-1).float() @ v
        return self.dense(y.permute(0, 2, 1, 3).reshape(B, T, D))


def main():
    torch.manual_seed(0)
    m = CastAttention().eval()
    out = os.path.join(HERE, "float_casts")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "test_data_set_0"))
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(1))
    torch.onnx.export(m, (x,), os.path.join(out, "model.onnx"), opset_version=13, input_names=["x"], output_names=["y"])
    model = onnx.load(os.path.join(out, "model.onnx"))
    onnx.checker.check_model(model)
    assert sum(n.op_type == "Cast" for n in model.graph.node) == 2, "the export should keep both Casts"
    with torch.no_grad():
        y = m(x)
    for kind, name, t in (("input", "x", x), ("output", "y", y)):
        with open(os.path.join(out, "test_data_set_0", f"{kind}_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy(), name).SerializeToString())


if __name__ == "__main__":
    main()
