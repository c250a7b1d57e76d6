#!/usr/bin/python3
"""Exports attention blocks whose heads are picked out of one fused
projection viewed as (B, T, G, d), for the lifting tests:

- viewed_heads_split: multi-query, G = H + 2 groups split into H query
  heads, one key head and one value head: the view transposed to
  (B, G, T, d), then torch.split on the groups axis (Split); the key head
  broadcasts.
- viewed_heads_gather: G = 3·H groups packed per head (query, key, value of
  head 0, then of head 1, ...), the view transposed to (B, G, T, d) and each
  of the three picked with index_select on the groups axis (Gather).

Both compute softmax(q·kᵀ/√d)·v and project the merged heads out (no bias
on the fused projection in the first, a bias in the second).

Usage, from the repository root (Debian's python3-torch and python3-onnx):

    /usr/bin/python3 onnxio/lift/testdata/export_viewed_heads.py

Each folder has model.onnx (opset 17, symbolic batch and sequence) and two
test-data sets of different shapes with PyTorch's outputs.
"""

import math
import os
import shutil

import onnx
import torch
from onnx import numpy_helper
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
D, HEADS = 16, 2
HD = D // HEADS


def attend(q, k, v):
    w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HD), dim=-1)
    y = (w @ v).transpose(1, 2)
    return y.reshape(y.shape[0], y.shape[1], D)


class SplitHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, D + 2 * HD, bias=False)
        self.out = nn.Linear(D, D)

    def forward(self, x):
        view = self.qkv(x).view(x.shape[0], x.shape[1], HEADS + 2, HD).transpose(1, 2)
        q, k, v = torch.split(view, [HEADS, 1, 1], dim=1)
        return self.out(attend(q, k, v))


class GatherHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.out = nn.Linear(D, D)
        self.register_buffer("q_groups", torch.tensor([0, 3]), persistent=False)
        self.register_buffer("k_groups", torch.tensor([1, 4]), persistent=False)
        self.register_buffer("v_groups", torch.tensor([2, 5]), persistent=False)

    def forward(self, x):
        view = self.qkv(x).view(x.shape[0], x.shape[1], 3 * HEADS, HD).transpose(1, 2)
        q = view.index_select(1, self.q_groups)
        k = view.index_select(1, self.k_groups)
        v = view.index_select(1, self.v_groups)
        return self.out(attend(q, k, v))


def write_set(folder, x, y):
    os.makedirs(folder)
    for kind, name, t in (("input_0", "x", x), ("output_0", "y", y)):
        with open(os.path.join(folder, kind + ".pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.detach().numpy(), name).SerializeToString())


def export(name, m, seed):
    out = os.path.join(HERE, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5, D, generator=g)
    torch.onnx.export(m, (x,), os.path.join(out, "model.onnx"), opset_version=17,
                      input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch", 1: "sequence"}, "y": {0: "batch", 1: "sequence"}})
    onnx.checker.check_model(onnx.load(os.path.join(out, "model.onnx")))
    with torch.no_grad():
        write_set(os.path.join(out, "test_data_set_0"), x, m(x))
        x1 = torch.randn(3, 7, D, generator=g)
        write_set(os.path.join(out, "test_data_set_1"), x1, m(x1))


def main():
    torch.manual_seed(0)
    export("viewed_heads_split", SplitHeads().eval(), 1)
    torch.manual_seed(1)
    export("viewed_heads_gather", GatherHeads().eval(), 2)


if __name__ == "__main__":
    main()
