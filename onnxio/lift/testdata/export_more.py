#!/usr/bin/python3
"""Exports more PyTorch modules for the lifting tests: the shapes the main
fixtures (testdata/onnx, testdata/torch/export_onnx.py) do not have.

Usage, from the repository root (Debian's python3-torch and python3-onnx):

    /usr/bin/python3 onnxio/lift/testdata/export_more.py

writes onnxio/lift/testdata/<case>_<static|dynamic>/model.onnx with one
test-data set each (test_data_set_0/input_K.pb, output_K.pb, each tensor
named after its graph input or output), and manifest.json listing the
attnrun layer types each must lift to. Static exports use opset 17, dynamic
ones opset 14 with symbolic batch and sequence axes. The modules are
testdata/torch/modules.py's.

The *_unbatched cases run on one sequence, as the seed notebooks do: a
(T, d) input with no batch axis (nn.MultiheadAttention's unbatched form,
key_padding_mask (S,) included), so their exports declare rank-2 inputs and
outputs; the lifted file must declare them the same way.
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


def batched(_):
    """One batch of 2 sequences of 6 tokens: x, with axes batch and seq."""
    x = torch.randn(2, 6, D, generator=torch.Generator().manual_seed(0))
    return {"x": (x, {0: "batch", 1: "seq"})}, {"y": {0: "batch", 1: "seq"}}


def unbatched(_):
    """One sequence of 6 tokens, (T, d): x, with axis seq."""
    x = torch.randn(6, D, generator=torch.Generator().manual_seed(0))
    return {"x": (x, {0: "seq"})}, {"y": {0: "seq"}}


def unbatched_with_weights(module):
    """unbatched, and the attention weights (T, T) as a second output."""
    inputs, outputs = unbatched(module)
    return inputs, {**outputs, "weights": {0: "seq", 1: "seq"}}


def unbatched_cross(_):
    """Queries (6, d), memory (8, d), its last two positions padded (S,)."""
    gen = torch.Generator().manual_seed(0)
    query, memory = torch.randn(6, D, generator=gen), torch.randn(8, D, generator=gen)
    padding = torch.arange(8) >= 6
    return ({"query": (query, {0: "seq"}), "memory": (memory, {0: "memory_seq"}),
             "key_padding_mask": (padding, {0: "memory_seq"})}, {"y": {0: "seq"}})


CASES = {
    # Heads that each add their own position table, concatenated and projected.
    "positional_heads": (lambda: modules.PositionalHeads(D, D, CONTEXT, HEADS),
                         ["position.learned", "attention.causal", "position.learned", "attention.causal",
                          "nn.concat", "nn.linear"], batched),
    "simple": (lambda: modules.SimpleAttention(), ["attention.simple"], batched),
    "simple_scaled_causal": (lambda: modules.SimpleAttention(scaled=True, causal=True), ["attention.simple"],
                             batched),
    "self_causal_unscaled": (lambda: modules.SelfAttention(D, 4, qkv_bias=True, causal=True, scaled=False),
                             ["attention.self"], batched),
    "sequenced": (Sequenced, ["attention.causal", "attention.multihead", "nn.add"], batched),
    "self_unbatched": (lambda: modules.SelfAttention(D, 4, qkv_bias=True), ["attention.self"],
                       unbatched),
    "causal_unbatched": (lambda: modules.CausalAttention(D, D, CONTEXT, qkv_bias=True), ["attention.causal"],
                         unbatched),
    "torch_mha_unbatched": (lambda: modules.TorchCausalSelfAttention(D, HEADS, CONTEXT), ["attention.multihead"],
                            unbatched_with_weights),
    "torch_cross_unbatched": (lambda: modules.TorchCrossAttention(D, HEADS), ["attention.torch_mha"],
                              unbatched_cross),
}


def main():
    manifest = []
    for name, (build, layers, data) in CASES.items():
        for dynamic in (False, True):
            torch.manual_seed(0)
            module = build().eval()
            inputs, outputs = data(module)
            folder = os.path.join(HERE, f"{name}_{'dynamic' if dynamic else 'static'}")
            shutil.rmtree(folder, ignore_errors=True)
            os.makedirs(os.path.join(folder, "test_data_set_0"))
            axes = {k: v for k, (_, v) in inputs.items()} | outputs if dynamic else None
            args = tuple(value for value, _ in inputs.values())
            path = os.path.join(folder, "model.onnx")
            with torch.no_grad():
                torch.onnx.export(module, args, path, opset_version=14 if dynamic else 17,
                                  input_names=list(inputs), output_names=list(outputs), dynamic_axes=axes)
                results = module(*args)
            if not isinstance(results, tuple):
                results = (results,)
            onnx.checker.check_model(onnx.load(path), full_check=True)
            tensors = [(f"input_{i}", n, v) for i, (n, v) in enumerate(zip(inputs, args))]
            tensors += [(f"output_{i}", n, v) for i, (n, v) in enumerate(zip(outputs, results))]
            for file, tensor_name, value in tensors:
                with open(os.path.join(folder, "test_data_set_0", file + ".pb"), "wb") as f:
                    f.write(numpy_helper.from_array(value.numpy(), tensor_name).SerializeToString())
            manifest.append({"name": os.path.basename(folder), "layers": layers})
            print("ok ", os.path.basename(folder))
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
