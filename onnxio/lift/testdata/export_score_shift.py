#!/usr/bin/python3
"""Exports self-attention whose scores get one number added everywhere, for
the lifting tests: BERT's extended attention mask (1 - m) * -10000 of an
attention_mask of zeros, folded into a constant by the exporter (as in ONNX
Runtime's fusion test fusion_mask_no_cast). Softmax ignores the shift but for
rounding: scores near 0 shifted by -10000 keep about three decimals, so the
output differs from unmasked attention by about 1e-5.

Usage, from the repository root (Debian's python3-torch and python3-onnx):

    /usr/bin/python3 onnxio/lift/testdata/export_score_shift.py

writes onnxio/lift/testdata/score_shift_static/model.onnx (opset 13, input
(2, 5, 16)) with test_data_set_0 (PyTorch's output).
"""

import math
import os
import shutil

import onnx
import torch
from onnx import numpy_helper
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
B, T, D, HEADS = 2, 5, 16, 2
HD = D // HEADS


class ShiftedAttention(nn.Module):
    """Multi-head self-attention plus BERT's extended mask of a mask of zeros."""

    def __init__(self):
        super().__init__()
        self.query, self.key, self.value, self.dense = (nn.Linear(D, D) for _ in range(4))
        self.register_buffer("attention_mask", torch.zeros(1, T))

    def forward(self, x):
        def heads(t):
            return t.view(B, T, HEADS, HD).permute(0, 2, 1, 3)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        extended = (1.0 - self.attention_mask[:, None, None, :]) * -10000.0
        scores = q @ k.transpose(-1, -2) / math.sqrt(HD) + extended
        y = torch.softmax(scores, dim=-1) @ v
        return self.dense(y.permute(0, 2, 1, 3).reshape(B, T, D))


def main():
    torch.manual_seed(0)
    m = ShiftedAttention().eval()
    out = os.path.join(HERE, "score_shift_static")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "test_data_set_0"))
    x = torch.randn(B, T, D, generator=torch.Generator().manual_seed(1))
    torch.onnx.export(m, (x,), os.path.join(out, "model.onnx"), opset_version=13, input_names=["x"], output_names=["y"])
    onnx.checker.check_model(onnx.load(os.path.join(out, "model.onnx")))
    with torch.no_grad():
        y = m(x)
    for kind, name, t in (("input", "x", x), ("output", "y", y)):
        with open(os.path.join(out, "test_data_set_0", f"{kind}_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy(), name).SerializeToString())


if __name__ == "__main__":
    main()
