#!/usr/bin/python3
"""Exports decoder blocks masked as Megatron's GPT-2 masks, for the lifting
tests. kvcache_context_mask: x + attention(x) with a packed KV cache
past (2, B, H, P, hd) and a keep mask over the whole context,
attention_mask (B, 1, CONTEXT, CONTEXT) of 1s and 0s, whose block of the
new queries the attention cuts at the cache's length and applies as
Megatron does:

    m = attention_mask[..., sk - sq:sk, :sk]
    scores = scores * m - 10000.0 * (1.0 - m)

with the fused query_key_value projection split in three, queries and keys
each divided by the fourth root of the head size (Megatron's
norm_factor), present = torch.stack((k, v)). kvcache_context_mask_where:
the same block with a bool attention_mask applied as
torch.where(m, scores, -inf). context_mask_block: the first block
without a KV cache (x and attention_mask in, y out), the mask sliced the
same way (rows 0..T of it), one test-data set of 5 tokens whose second
sequence hides its third key.

Usage, from the repository root (Debian's python3-torch and python3-onnx):

    /usr/bin/python3 onnxio/lift/testdata/export_kvcache_context_mask.py

Each folder has model.onnx (opset 13, symbolic batch, sequence and past) and
two test-data sets of PyTorch's outputs: test_data_set_0 with a past of 3
tokens and 4 new ones, a causal mask in which the first sequence also
hides its second key; test_data_set_1 with no past and 5 new tokens, a
causal mask.
"""

import math
import os
import shutil

import onnx
import torch
from onnx import numpy_helper
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
D, HEADS, CONTEXT = 16, 2, 16
HD = D // HEADS


class MegatronBlock(nn.Module):
    """x + attention(x) over the cached keys and values and the new ones."""

    def __init__(self, where=False):
        super().__init__()
        self.where = where
        self.query_key_value = nn.Linear(D, 3 * D)
        self.dense = nn.Linear(D, D)

    def heads(self, x):
        return x.view(x.size(0), x.size(1), HEADS, HD).permute(0, 2, 1, 3)

    def forward(self, x, attention_mask, past=None):
        q, k, v = (self.heads(t) for t in self.query_key_value(x).split(D, dim=2))
        if past is None:
            return self.attend(x, attention_mask, q, k, v)
        k = torch.cat((past[0], k), dim=-2)
        v = torch.cat((past[1], v), dim=-2)
        return self.attend(x, attention_mask, q, k, v), torch.stack((k, v))

    def attend(self, x, attention_mask, q, k, v):
        norm = math.sqrt(math.sqrt(HD))
        scores = torch.matmul(q / norm, k.transpose(-1, -2) / norm)
        sq, sk = scores.size(-2), scores.size(-1)
        m = attention_mask[..., sk - sq:sk, :sk]
        if self.where:
            scores = torch.where(m, scores, torch.tensor(float("-inf")))
        else:
            scores = scores * m - 10000.0 * (1.0 - m)
        y = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        return x + self.dense(y.view(y.size(0), y.size(1), D))


def causal(batch, dtype):
    return torch.tril(torch.ones(CONTEXT, CONTEXT)).expand(batch, 1, CONTEXT, CONTEXT).to(dtype).clone()


def write_set(folder, names, tensors, inputs=3):
    os.makedirs(folder)
    for i, (name, t) in enumerate(zip(names, tensors)):
        kind, k = ("input", i) if i < inputs else ("output", i - inputs)
        with open(os.path.join(folder, f"{kind}_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.detach().numpy(), name).SerializeToString())


def export(name, m, dtype):
    out = os.path.join(HERE, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 4, D, generator=g)
    mask = causal(2, dtype)
    mask[0, 0, :, 1] = 0  # the first sequence hides its second key from every query
    past = torch.randn(2, 2, HEADS, 3, HD, generator=g)
    names = ["x", "attention_mask", "past", "y", "present"]
    torch.onnx.export(m, (x, mask, past), os.path.join(out, "model.onnx"), opset_version=13,
                      input_names=names[:3], output_names=names[3:],
                      dynamic_axes={"x": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch"},
                                    "past": {1: "batch", 3: "past_sequence"},
                                    "y": {0: "batch", 1: "sequence"}, "present": {1: "batch", 3: "total_sequence"}})
    onnx.checker.check_model(onnx.load(os.path.join(out, "model.onnx")))
    with torch.no_grad():
        write_set(os.path.join(out, "test_data_set_0"), names, [x, mask, past, *m(x, mask, past)])
        x1 = torch.randn(2, 5, D, generator=g)
        e = torch.zeros(2, 2, HEADS, 0, HD)
        write_set(os.path.join(out, "test_data_set_1"), names, [x1, causal(2, dtype), e, *m(x1, causal(2, dtype), e)])


def export_block(name, m):
    out = os.path.join(HERE, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 5, D, generator=g)
    mask = causal(2, torch.float32)
    mask[1, 0, :, 2] = 0
    names = ["x", "attention_mask", "y"]
    torch.onnx.export(m, (x, mask), os.path.join(out, "model.onnx"), opset_version=13,
                      input_names=names[:2], output_names=names[2:],
                      dynamic_axes={"x": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch"},
                                    "y": {0: "batch", 1: "sequence"}})
    onnx.checker.check_model(onnx.load(os.path.join(out, "model.onnx")))
    with torch.no_grad():
        write_set(os.path.join(out, "test_data_set_0"), names, [x, mask, m(x, mask)], inputs=2)


def main():
    torch.manual_seed(0)
    export("kvcache_context_mask", MegatronBlock().eval(), torch.float32)
    torch.manual_seed(0)
    export("kvcache_context_mask_where", MegatronBlock(where=True).eval(), torch.bool)
    torch.manual_seed(0)
    export_block("context_mask_block", MegatronBlock().eval())


if __name__ == "__main__":
    main()
