#!/usr/bin/python3
"""Exports GELU written in the orders exporters meet it, for the lifting
tests: each graph computes the exact (erf) or tanh GELU with its products and
sums in a different order, and the lifter must recognize every one by what it
computes.

- megatron_tanh: Megatron's bias_gelu, x·0.5·(1 + tanh(0.79788456·x·(1 + 0.044715·x·x)))
  between two Linears (as nn.mlp's activation);
- hf_tanh: Hugging Face's gelu_new, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), Pow;
- reordered_tanh: (1 + tanh((0.044715·x·x·x + x)·√(2/π)))·x·0.5;
- reordered_erf: (erf(x·(1/√2)) + 1)·(0.5·x);
- near_gelu: the tanh form with 0.05 for 0.044715, which is no GELU and
  must not lift as one.

Usage, from the repository root (Debian's python3-torch and python3-onnx):

    /usr/bin/python3 onnxio/lift/testdata/export_gelu_orders.py

writes onnxio/lift/testdata/gelu_orders/NAME/model.onnx (opset 13, input x
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
B, T, D = 2, 5, 8


def megatron_tanh(x):
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def hf_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def reordered_tanh(x):
    return (1.0 + torch.tanh((0.044715 * x * x * x + x) * math.sqrt(2.0 / math.pi))) * x * 0.5


def reordered_erf(x):
    return (torch.erf(x * (1.0 / math.sqrt(2.0))) + 1.0) * (0.5 * x)


def near_gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.05 * torch.pow(x, 3.0))))


class Activation(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(x)


class MLP(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f, self.up, self.down = f, nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        return self.down(self.f(self.up(x)))


CASES = {
    "megatron_tanh": MLP(megatron_tanh),
    "hf_tanh": Activation(hf_tanh),
    "reordered_tanh": Activation(reordered_tanh),
    "reordered_erf": Activation(reordered_erf),
    "near_gelu": Activation(near_gelu),
}


def main():
    torch.manual_seed(0)
    root = os.path.join(HERE, "gelu_orders")
    shutil.rmtree(root, ignore_errors=True)
    x = 2 * torch.randn(B, T, D, generator=torch.Generator().manual_seed(1))
    for name, m in CASES.items():
        m.eval()
        out = os.path.join(root, name)
        os.makedirs(os.path.join(out, "test_data_set_0"))
        torch.onnx.export(m, (x,), os.path.join(out, "model.onnx"), opset_version=13,
                          input_names=["x"], output_names=["y"])
        onnx.checker.check_model(onnx.load(os.path.join(out, "model.onnx")))
        with torch.no_grad():
            y = m(x)
        for kind, vname, t in (("input", "x", x), ("output", "y", y)):
            with open(os.path.join(out, "test_data_set_0", f"{kind}_0.pb"), "wb") as f:
                f.write(numpy_helper.from_array(t.numpy(), vname).SerializeToString())


if __name__ == "__main__":
    main()
