#!/usr/bin/python3
"""Exports a causal attention block with a KV cache for the lifting tests:
the past/present interface of Hugging Face's decoders (past keys and values
in, (B, heads, past, head_dim); the extended cache out), on a block the
lifter recognizes without Hugging Face's masks, after Hugging Face's
RMSNorm (float32 casts, rsqrt), then Gemma's gated MLP with the tanh GELU
written as the TorchScript exporter writes it (x * x * x).

Usage, from the repository root (Debian's python3-torch and python3-onnx):

    /usr/bin/python3 onnxio/lift/testdata/export_kvcache.py

writes onnxio/lift/testdata/kvcache_block_dynamic/model.onnx (opset 17,
symbolic batch, sequence and past_sequence) with two test-data sets:
test_data_set_0 with a past of 3 tokens and 4 new ones, test_data_set_1
with no past and 5 new tokens (PyTorch's outputs for each); and
kvcache_decoder_dynamic, the block inside a decoder of token ids (Gemma's
scaled embeddings, final norm, LM head and logit softcapping), with the
same two data sets and PyTorch's greedy ids after a prompt
(generate.json).
"""

import json
import math
import os
import shutil

import onnx
import torch
from onnx import numpy_helper
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
D, HEADS, CONTEXT, VOCAB, SOFTCAP = 16, 2, 32, 20, 3.0
HD = D // HEADS


class RMSNorm(nn.Module):
    """Hugging Face's LlamaRMSNorm: computed in float32, cast back, then weighted."""

    def __init__(self, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(D))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(dtype)


class GatedMLP(nn.Module):
    """Gemma's MLP: down(gelu_tanh(gate(x)) * up(x)), the cube written x * x * x
    as the TorchScript exporter writes gelu(approximate="tanh") today."""

    def __init__(self, hidden=24):
        super().__init__()
        self.gate_proj = nn.Linear(D, hidden, bias=False)
        self.up_proj = nn.Linear(D, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, D, bias=False)

    def forward(self, x):
        g = self.gate_proj(x)
        act = 0.5 * (g * (1 + torch.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * (g * g * g)))))
        return self.down_proj(act * self.up_proj(x))


class CachedAttention(nn.Module):
    """A decoder block: x + attention(norm(x)) over the cached keys and values
    and the new ones, then h + mlp(norm(h))."""

    def __init__(self):
        super().__init__()
        self.norm = RMSNorm()
        self.mlp_norm = RMSNorm()
        self.mlp = GatedMLP()
        self.q_proj = nn.Linear(D, D)
        self.k_proj = nn.Linear(D, D)
        self.v_proj = nn.Linear(D, D)
        self.out_proj = nn.Linear(D, D)
        self.register_buffer("causal", torch.triu(torch.ones(CONTEXT, CONTEXT, dtype=torch.bool), 1))

    def forward(self, x, past_key, past_value):
        b, t, _ = x.shape
        h = self.norm(x)
        q, k, v = (p(h).view(b, t, HEADS, HD).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        k = torch.cat([past_key, k], dim=2)
        v = torch.cat([past_value, v], dim=2)
        past = past_key.shape[2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(HD)
        scores = scores.masked_fill(self.causal[past:past + t, :past + t], float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        h = x + self.out_proj(y.transpose(1, 2).reshape(b, t, D))
        return h + self.mlp(self.mlp_norm(h)), k, v


class TinyDecoder(nn.Module):
    """A decoder with Gemma's ends: embeddings times sqrt(D), the block, a
    final RMSNorm, the LM head and the final logit softcapping."""

    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, D)
        self.block = CachedAttention()
        self.norm = RMSNorm()
        self.lm_head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, input_ids, past_key, past_value):
        h = self.embed_tokens(input_ids) * torch.tensor(D ** 0.5, dtype=torch.float32)
        h, k, v = self.block(h, past_key, past_value)
        logits = self.lm_head(self.norm(h))
        return torch.tanh(logits / SOFTCAP) * SOFTCAP, k, v


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    """Llama's attention with a KV cache: RoPE (rotate_half, cos and sin from
    inv_freq at positions past..past+T), grouped-query heads repeated by
    repeat_kv, a causal mask sliced from a buffer, no biases."""

    def __init__(self, heads=4, kv_heads=2, base=10000.0):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        self.q_proj = nn.Linear(D, heads * HD, bias=False)
        self.k_proj = nn.Linear(D, kv_heads * HD, bias=False)
        self.v_proj = nn.Linear(D, kv_heads * HD, bias=False)
        self.o_proj = nn.Linear(heads * HD, D, bias=False)
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, HD, 2).float() / HD)))
        self.register_buffer("causal", torch.triu(torch.ones(CONTEXT, CONTEXT, dtype=torch.bool), 1))

    def forward(self, x, past_key, past_value):
        b, t, _ = x.shape
        past = past_key.shape[2]
        q = self.q_proj(x).view(b, t, self.heads, HD).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, HD).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, HD).transpose(1, 2)
        positions = torch.arange(past, past + t).float()
        freqs = positions[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.cat([past_key, k], dim=2)
        v = torch.cat([past_value, v], dim=2)
        rep = self.heads // self.kv_heads
        kr = k[:, :, None].expand(b, self.kv_heads, rep, past + t, HD).reshape(b, self.heads, past + t, HD)
        vr = v[:, :, None].expand(b, self.kv_heads, rep, past + t, HD).reshape(b, self.heads, past + t, HD)
        scores = q @ kr.transpose(-2, -1) / math.sqrt(HD)
        scores = scores.masked_fill(self.causal[past:past + t, :past + t], float("-inf"))
        y = torch.softmax(scores, dim=-1) @ vr
        return self.o_proj(y.transpose(1, 2).reshape(b, t, self.heads * HD)), k, v


def write_set(folder, names, tensors):
    os.makedirs(folder)
    for i, (name, t) in enumerate(zip(names, tensors)):
        kind = "input" if i < 3 else "output"
        k = i if i < 3 else i - 3
        proto = numpy_helper.from_array(t.detach().numpy(), name)
        with open(os.path.join(folder, f"{kind}_{k}.pb"), "wb") as f:
            f.write(proto.SerializeToString())


def main():
    torch.manual_seed(0)
    m = CachedAttention().eval()
    out = os.path.join(HERE, "kvcache_block_dynamic")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 4, D, generator=g)
    pk, pv = torch.randn(2, HEADS, 3, HD, generator=g), torch.randn(2, HEADS, 3, HD, generator=g)
    names = ["x", "past_key_values.0.key", "past_key_values.0.value", "y", "present.0.key", "present.0.value"]
    torch.onnx.export(m, (x, pk, pv), os.path.join(out, "model.onnx"), opset_version=17,
                      input_names=names[:3], output_names=names[3:],
                      dynamic_axes={"x": {0: "batch", 1: "sequence"},
                                    "past_key_values.0.key": {0: "batch", 2: "past_sequence"},
                                    "past_key_values.0.value": {0: "batch", 2: "past_sequence"},
                                    "y": {0: "batch", 1: "sequence"},
                                    "present.0.key": {0: "batch", 2: "total_sequence"},
                                    "present.0.value": {0: "batch", 2: "total_sequence"}})
    onnx.checker.check_model(onnx.load(os.path.join(out, "model.onnx")))
    with torch.no_grad():
        write_set(os.path.join(out, "test_data_set_0"), names, [x, pk, pv, *m(x, pk, pv)])
        x1 = torch.randn(2, 5, D, generator=g)
        e = torch.zeros(2, HEADS, 0, HD)
        write_set(os.path.join(out, "test_data_set_1"), names, [x1, e, e, *m(x1, e, e)])


def export_decoder():
    """kvcache_decoder_dynamic: TinyDecoder with input_ids, and the greedy
    ids PyTorch picks after a prompt (generate.json), the whole sequence
    recomputed at every step."""
    torch.manual_seed(2)
    m = TinyDecoder().eval()
    out = os.path.join(HERE, "kvcache_decoder_dynamic")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, VOCAB, (2, 4), generator=g)
    pk, pv = torch.randn(2, HEADS, 3, HD, generator=g), torch.randn(2, HEADS, 3, HD, generator=g)
    names = ["input_ids", "past_key_values.0.key", "past_key_values.0.value", "logits", "present.0.key", "present.0.value"]
    torch.onnx.export(m, (ids, pk, pv), os.path.join(out, "model.onnx"), opset_version=17,
                      input_names=names[:3], output_names=names[3:],
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                    "past_key_values.0.key": {0: "batch", 2: "past_sequence"},
                                    "past_key_values.0.value": {0: "batch", 2: "past_sequence"},
                                    "logits": {0: "batch", 1: "sequence"},
                                    "present.0.key": {0: "batch", 2: "total_sequence"},
                                    "present.0.value": {0: "batch", 2: "total_sequence"}})
    onnx.checker.check_model(onnx.load(os.path.join(out, "model.onnx")))
    e = torch.zeros(1, HEADS, 0, HD)
    with torch.no_grad():
        write_set(os.path.join(out, "test_data_set_0"), names, [ids, pk, pv, *m(ids, pk, pv)])
        ids1 = torch.randint(0, VOCAB, (2, 5), generator=g)
        e2 = torch.zeros(2, HEADS, 0, HD)
        write_set(os.path.join(out, "test_data_set_1"), names, [ids1, e2, e2, *m(ids1, e2, e2)])
        prompt, new = [3, 7, 1], []
        for _ in range(8):
            logits, _, _ = m(torch.tensor([prompt + new]), e, e)
            new.append(int(torch.argmax(logits[0, -1])))
    with open(os.path.join(out, "generate.json"), "w") as f:
        json.dump({"generator": "onnxio/lift/testdata/export_kvcache.py", "torch": torch.__version__,
                   "prompt": prompt, "new_ids": new}, f)
        f.write("\n")


def export_rope():
    """kvcache_rope_dynamic: LlamaAttention alone, its cache of 2 KV heads."""
    torch.manual_seed(4)
    m = LlamaAttention().eval()
    out = os.path.join(HERE, "kvcache_rope_dynamic")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 4, D, generator=g)
    pk, pv = torch.randn(2, 2, 3, HD, generator=g), torch.randn(2, 2, 3, HD, generator=g)
    names = ["x", "past_key_values.0.key", "past_key_values.0.value", "y", "present.0.key", "present.0.value"]
    torch.onnx.export(m, (x, pk, pv), os.path.join(out, "model.onnx"), opset_version=17,
                      input_names=names[:3], output_names=names[3:],
                      dynamic_axes={"x": {0: "batch", 1: "sequence"},
                                    "past_key_values.0.key": {0: "batch", 2: "past_sequence"},
                                    "past_key_values.0.value": {0: "batch", 2: "past_sequence"},
                                    "y": {0: "batch", 1: "sequence"},
                                    "present.0.key": {0: "batch", 2: "total_sequence"},
                                    "present.0.value": {0: "batch", 2: "total_sequence"}})
    onnx.checker.check_model(onnx.load(os.path.join(out, "model.onnx")))
    with torch.no_grad():
        write_set(os.path.join(out, "test_data_set_0"), names, [x, pk, pv, *m(x, pk, pv)])
        x1 = torch.randn(2, 5, D, generator=g)
        e = torch.zeros(2, 2, 0, HD)
        write_set(os.path.join(out, "test_data_set_1"), names, [x1, e, e, *m(x1, e, e)])


if __name__ == "__main__":
    main()
    export_decoder()
    export_rope()
