#!/usr/bin/python3
"""Exports attention blocks whose KV cache is packed, for the lifting tests:
one past input stacks the cached tensors on a first axis and one present
output returns them extended, stacked the same way, as GPT-2's exports do.

- kvcache_packed_gpt2: Hugging Face GPT-2's attention of transformers 2.x/3.x
  (ONNX Runtime's GPT-2 tests): the fused c_attn projection (Conv1D, weight
  (in, out)), past (2, B, H, P, hd) read as past[0] and past[1] (Gather), the
  keys cached transposed (cat on the last axis of kᵀ), present =
  torch.stack((kᵀ of all tokens transposed back, v)), the causal mask cut
  from the bias buffer and filled with -10000 (torch.where).
- kvcache_packed_split: two causal blocks sharing one past (4, B, H, P, hd),
  keys then values of the first block, then of the second, unbound with
  torch.split into entries of one (Split, Squeeze); present stacks the four
  extended tensors in the same order.
- kvcache_packed_slice: one block whose past (2, B, H, P, hd) is read as
  past[0:1] and past[1:2] squeezed (Slice, Squeeze), present torch.cat of
  the extended keys and values unsqueezed.

Usage, from the repository root (Debian's python3-torch and python3-onnx):

    /usr/bin/python3 onnxio/lift/testdata/export_kvcache_packed.py

Each folder has model.onnx (opset 13, symbolic batch, sequence and past)
and two test-data sets: test_data_set_0 with a past of 3 tokens and 4 new
ones, test_data_set_1 with no past and 5 new tokens (PyTorch's outputs).
"""

import math
import os
import shutil

import onnx
import torch
from onnx import numpy_helper
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
D, HEADS, CONTEXT = 16, 2, 32
HD = D // HEADS


class Conv1D(nn.Module):
    """GPT-2's Conv1D: x @ weight + bias with weight (in, out)."""

    def __init__(self, nx, nf):
        super().__init__()
        self.weight = nn.Parameter(0.3 * torch.randn(nx, nf))
        self.bias = nn.Parameter(0.1 * torch.randn(nf))

    def forward(self, x):
        return x @ self.weight + self.bias


class GPT2Attention(nn.Module):
    """transformers 2.x GPT-2 Attention with layer_past packed and keys
    cached transposed."""

    def __init__(self):
        super().__init__()
        self.c_attn = Conv1D(D, 3 * D)
        self.c_proj = Conv1D(D, D)
        self.register_buffer("bias", torch.tril(torch.ones(CONTEXT, CONTEXT)).view(1, 1, CONTEXT, CONTEXT))

    def split_heads(self, x, k=False):
        x = x.view(x.size(0), x.size(1), HEADS, HD)
        return x.permute(0, 2, 3, 1) if k else x.permute(0, 2, 1, 3)

    def forward(self, x, layer_past):
        query, key, value = self.c_attn(x).split(D, dim=2)
        query, key, value = self.split_heads(query), self.split_heads(key, k=True), self.split_heads(value)
        past_key, past_value = layer_past[0].transpose(-2, -1), layer_past[1]
        key = torch.cat((past_key, key), dim=-1)
        value = torch.cat((past_value, value), dim=-2)
        present = torch.stack((key.transpose(-2, -1), value))
        w = torch.matmul(query, key) / math.sqrt(HD)
        nd, ns = w.size(-2), w.size(-1)
        b = self.bias[:, :, ns - nd:ns, :ns]
        w = torch.where(b.bool(), w, torch.tensor(-1e4))
        a = torch.matmul(nn.functional.softmax(w, dim=-1), value)
        a = a.permute(0, 2, 1, 3).contiguous()
        return self.c_proj(a.view(a.size(0), a.size(1), D)), present


class Block(nn.Module):
    """x + attention(x) with separate projections, causal, over the cached
    keys and values (B, H, P, hd) and the new ones."""

    def __init__(self):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(D, D) for _ in range(4))
        self.register_buffer("causal", torch.triu(torch.ones(CONTEXT, CONTEXT, dtype=torch.bool), 1))

    def forward(self, x, past_key, past_value):
        b, t, _ = x.shape
        q, k, v = (p(x).view(b, t, HEADS, HD).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        k = torch.cat([past_key, k], dim=2)
        v = torch.cat([past_value, v], dim=2)
        past = past_key.shape[2]
        scores = (q @ k.transpose(-2, -1) / math.sqrt(HD)).masked_fill(self.causal[past:past + t, :past + t], float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return x + self.out_proj(y.transpose(1, 2).reshape(b, t, D)), k, v


class TwoBlocks(nn.Module):
    """Two blocks whose four caches are packed in one past."""

    def __init__(self):
        super().__init__()
        self.first, self.second = Block(), Block()

    def forward(self, x, past):
        k1, v1, k2, v2 = (p.squeeze(0) for p in torch.split(past, 1, dim=0))
        h, k1, v1 = self.first(x, k1, v1)
        y, k2, v2 = self.second(h, k2, v2)
        return y, torch.stack((k1, v1, k2, v2))


class SlicedBlock(nn.Module):
    """A block whose past is sliced entry by entry."""

    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x, past):
        y, k, v = self.block(x, past[0:1].squeeze(0), past[1:2].squeeze(0))
        return y, torch.cat((k.unsqueeze(0), v.unsqueeze(0)), dim=0)


def write_set(folder, names, tensors):
    os.makedirs(folder)
    for i, (name, t) in enumerate(zip(names, tensors)):
        kind, k = ("input", i) if i < 2 else ("output", i - 2)
        with open(os.path.join(folder, f"{kind}_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.detach().numpy(), name).SerializeToString())


def export(name, m, entries, seed):
    out = os.path.join(HERE, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 4, D, generator=g)
    past = torch.randn(entries, 2, HEADS, 3, HD, generator=g)
    names = ["x", "past", "y", "present"]
    torch.onnx.export(m, (x, past), os.path.join(out, "model.onnx"), opset_version=13,
                      input_names=names[:2], output_names=names[2:],
                      dynamic_axes={"x": {0: "batch", 1: "sequence"}, "past": {1: "batch", 3: "past_sequence"},
                                    "y": {0: "batch", 1: "sequence"}, "present": {1: "batch", 3: "total_sequence"}})
    onnx.checker.check_model(onnx.load(os.path.join(out, "model.onnx")))
    with torch.no_grad():
        write_set(os.path.join(out, "test_data_set_0"), names, [x, past, *m(x, past)])
        x1 = torch.randn(2, 5, D, generator=g)
        e = torch.zeros(entries, 2, HEADS, 0, HD)
        write_set(os.path.join(out, "test_data_set_1"), names, [x1, e, *m(x1, e)])


def main():
    torch.manual_seed(0)
    export("kvcache_packed_gpt2", GPT2Attention().eval(), 2, 1)
    torch.manual_seed(1)
    export("kvcache_packed_split", TwoBlocks().eval(), 4, 2)
    torch.manual_seed(2)
    export("kvcache_packed_slice", SlicedBlock().eval(), 2, 3)


if __name__ == "__main__":
    main()
