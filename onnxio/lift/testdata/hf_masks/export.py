#!/usr/bin/python3
"""Exports BERT-style self-attention masked by Hugging Face's attention_mask
for the lifting tests: the mask (B, S) of 1s (tokens) and 0s (padding) is
turned into the additive extended mask (1 - mask) * fill, broadcast as
(B, 1, 1, S), and added to the scaled scores, as BertSelfAttention does.

Usage, from the repository root (Debian's python3-torch and python3-onnx):

    /usr/bin/python3 onnxio/lift/testdata/hf_masks/export.py

writes onnxio/lift/testdata/hf_masks/<case>/model.onnx (opset 14, symbolic
batch and seq axes) with one test-data set (batch 2, seq 5, the second
sequence padded after 3 tokens), and manifest.json listing the attnrun layer
types each must lift to.
"""

import json
import math
import os
import shutil

import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
D = 16


class BertAttention(torch.nn.Module):
    """BertSelfAttention + the output dense, eager, written out as in
    transformers: heads of head_dim, all_head_size = heads * head_dim (less
    than D when heads were pruned)."""

    def __init__(self, heads=4, head_dim=4, fill=-10000.0):
        super().__init__()
        self.heads, self.head_dim, self.fill = heads, head_dim, fill
        inner = heads * head_dim
        self.query = torch.nn.Linear(D, inner)
        self.key = torch.nn.Linear(D, inner)
        self.value = torch.nn.Linear(D, inner)
        self.dense = torch.nn.Linear(inner, D)

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, extended):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = torch.softmax(scores + extended, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        b, t = ctx.shape[0], ctx.shape[1]
        return self.dense(ctx.view(b, t, self.heads * self.head_dim))


class Encoder(torch.nn.Module):
    """Attention layers with residuals sharing one extended mask."""

    def __init__(self, layers=1, mask_dtype=torch.int64, **kw):
        super().__init__()
        self.mask_dtype = mask_dtype
        self.layers = torch.nn.ModuleList([BertAttention(**kw) for _ in range(layers)])
        self.fill = self.layers[0].fill

    def forward(self, x, attention_mask):
        extended = attention_mask[:, None, None, :].to(torch.float32)
        extended = (1.0 - extended) * self.fill
        for layer in self.layers:
            x = layer(x, extended) + x if len(self.layers) > 1 else layer(x, extended)
        return x


CASES = {
    "int64_mask": (lambda: Encoder(), torch.int64, ["mask.padding", "attention.sdpa"]),
    "float_mask_finfo_min": (lambda: Encoder(fill=torch.finfo(torch.float32).min), torch.float32,
                             ["mask.padding", "attention.sdpa"]),
    "int32_mask_pruned_heads": (lambda: Encoder(heads=2), torch.int32, ["mask.padding", "attention.sdpa"]),
    "int64_mask_two_layers": (lambda: Encoder(layers=2), torch.int64,
                              ["mask.padding", "attention.sdpa", "nn.add", "attention.sdpa", "nn.add"]),
}


def main():
    manifest = []
    for name, (build, mask_dtype, layers) in CASES.items():
        torch.manual_seed(0)
        module = build().eval()
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(2, 5, D, generator=gen)
        mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=mask_dtype)
        folder = os.path.join(HERE, name)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(os.path.join(folder, "test_data_set_0"))
        path = os.path.join(folder, "model.onnx")
        axes = {"x": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}
        with torch.no_grad():
            torch.onnx.export(module, (x, mask), path, opset_version=14, input_names=["x", "attention_mask"],
                              output_names=["y"], dynamic_axes=axes)
            y = module(x, mask)
        onnx.checker.check_model(onnx.load(path), full_check=True)
        for file, tensor_name, value in [("input_0", "x", x), ("input_1", "attention_mask", mask), ("output_0", "y", y)]:
            with open(os.path.join(folder, "test_data_set_0", file + ".pb"), "wb") as f:
                f.write(numpy_helper.from_array(value.numpy(), tensor_name).SerializeToString())
        manifest.append({"name": name, "layers": layers})
        print("ok ", name)
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
