#!/usr/bin/python3
"""Exports more PyTorch modules for the lifting tests: the shapes the main
fixtures (testdata/onnx, testdata/torch/export_onnx.py) do not have.

Usage, from the repository root (Debian's python3-torch and python3-onnx):

    /usr/bin/python3 onnxio/lift/testdata/export_more.py

writes onnxio/lift/testdata/<case>_<static|dynamic>/model.onnx with one
test-data set each (test_data_set_0/input_0.pb, output_0.pb), and
manifest.json listing the attnrun layer types each must lift to. Static
exports use opset 17, dynamic ones opset 14 with symbolic batch and
sequence axes. The modules are testdata/torch/modules.py's.
"""

import json
import os
import shutil
import sys

import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "testdata", "torch"))
import modules  # noqa: E402

D, CONTEXT, HEADS = 8, 8, 2


class Sequenced(torch.nn.Module):
    """A causal head, then non-causal multi-head attention, plus a residual."""

    def __init__(self):
        super().__init__()
        self.a = modules.CausalAttention(D, D, CONTEXT)
        self.b = modules.MultiHeadAttention(D, D, CONTEXT, HEADS, causal=False, qkv_bias=True)

    def forward(self, x):
        return self.b(self.a(x)) + x


CASES = {
    # Heads that each add their own position table, concatenated and projected.
    "positional_heads": (lambda: modules.PositionalHeads(D, D, CONTEXT, HEADS),
                         ["position.learned", "attention.causal", "position.learned", "attention.causal",
                          "nn.concat", "nn.linear"]),
    "simple": (lambda: modules.SimpleAttention(), ["attention.simple"]),
    "simple_scaled_causal": (lambda: modules.SimpleAttention(scaled=True, causal=True), ["attention.simple"]),
    "self_causal_unscaled": (lambda: modules.SelfAttention(D, 4, qkv_bias=True, causal=True, scaled=False),
                             ["attention.self"]),
    "sequenced": (Sequenced, ["attention.causal", "attention.multihead", "nn.add"]),
}


def main():
    manifest = []
    for name, (build, layers) in CASES.items():
        for dynamic in (False, True):
            torch.manual_seed(0)
            module = build().eval()
            x = torch.randn(2, 6, D, generator=torch.Generator().manual_seed(0))
            folder = os.path.join(HERE, f"{name}_{'dynamic' if dynamic else 'static'}")
            shutil.rmtree(folder, ignore_errors=True)
            os.makedirs(os.path.join(folder, "test_data_set_0"))
            axes = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}} if dynamic else None
            path = os.path.join(folder, "model.onnx")
            with torch.no_grad():
                torch.onnx.export(module, (x,), path, opset_version=14 if dynamic else 17,
                                  input_names=["x"], output_names=["y"], dynamic_axes=axes)
                y = module(x)
            onnx.checker.check_model(onnx.load(path), full_check=True)
            for kind, value in (("input_0", x), ("output_0", y)):
                with open(os.path.join(folder, "test_data_set_0", kind + ".pb"), "wb") as f:
                    f.write(numpy_helper.from_array(value.numpy(), kind[:-2]).SerializeToString())
            manifest.append({"name": os.path.basename(folder), "layers": layers})
            print("ok ", os.path.basename(folder))
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
