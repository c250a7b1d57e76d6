#!/usr/bin/python3
"""Exports self-attention masked as Hugging Face writes it, for the lifting
tests: BERT's attention_mask (B, S) of 1s (tokens) and 0s (padding) turned
into the additive extended mask (1 - mask) * fill, broadcast as (B, 1, 1, S)
and added to the scaled scores; GPT-2's causal bias buffer applied with
torch.where(bias, w, masked_bias) (-10000 or finfo.min), with and without
the extended mask added after it.

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


class GPT2Attention(torch.nn.Module):
    """GPT2Attention, eager, as transformers 4.x wrote it: Conv1D weights
    stored (in, out), the fused c_attn split into q, k, v, the causal bias
    buffer cut to the keys and applied with torch.where(bias, w, fill),
    and the extended attention mask, if any, added to the scores."""

    def __init__(self, heads=4, context=8, fill=-1e4, **_):
        super().__init__()
        self.heads, self.fill = heads, fill
        self.c_attn_weight = torch.nn.Parameter(torch.randn(D, 3 * D) * 0.3)
        self.c_attn_bias = torch.nn.Parameter(torch.randn(3 * D) * 0.1)
        self.c_proj_weight = torch.nn.Parameter(torch.randn(D, D) * 0.3)
        self.c_proj_bias = torch.nn.Parameter(torch.randn(D) * 0.1)
        self.register_buffer("bias", torch.tril(torch.ones(context, context, dtype=torch.bool)).view(1, 1, context, context))
        self.register_buffer("masked_bias", torch.tensor(fill))

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, D // self.heads).permute(0, 2, 1, 3)

    def forward(self, x, extended=None):
        qkv = torch.addmm(self.c_attn_bias, x.view(-1, D), self.c_attn_weight).view(x.shape[0], x.shape[1], 3 * D)
        q, k, v = qkv.split(D, dim=2)
        q, k, v = self.split(q), self.split(k), self.split(v)
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D // self.heads)
        nd, ns = w.size(-2), w.size(-1)
        w = torch.where(self.bias[:, :, ns - nd:ns, :ns], w, self.masked_bias.to(w.dtype))
        if extended is not None:
            w = w + extended
        a = torch.matmul(torch.softmax(w, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        a = a.view(a.shape[0], a.shape[1], D)
        return torch.addmm(self.c_proj_bias, a.view(-1, D), self.c_proj_weight).view(a.shape)


class GPT2(torch.nn.Module):
    """GPT2Attention alone, or given the attention mask."""

    def __init__(self, with_mask=True, **kw):
        super().__init__()
        self.with_mask = with_mask
        self.attn = GPT2Attention(**kw)

    def forward(self, x, attention_mask):
        if not self.with_mask:
            return self.attn(x)
        extended = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        return self.attn(x, extended)


class Embedded(torch.nn.Module):
    """Word and token-type embeddings (nn.Embedding on int64 ids), summed
    and normalized, then BERT attention with the extended mask."""

    def __init__(self):
        super().__init__()
        self.word = torch.nn.Embedding(30, D, padding_idx=0)
        self.token_type = torch.nn.Embedding(2, D)
        self.norm = torch.nn.LayerNorm(D)
        self.encoder = Encoder()

    def forward(self, input_ids, attention_mask, token_type_ids):
        x = self.norm(self.word(input_ids) + self.token_type(token_type_ids))
        return self.encoder(x, attention_mask)


class OldLayerNorm(torch.nn.Module):
    """pytorch-pretrained-bert's BertLayerNorm: x - mean computed twice."""

    def __init__(self, eps=1e-12):
        super().__init__()
        self.weight, self.bias, self.eps = torch.nn.Parameter(1 + 0.1 * torch.randn(D)), torch.nn.Parameter(0.1 * torch.randn(D)), eps

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        return self.weight * ((x - u) / torch.sqrt(s + self.eps)) + self.bias


class OldBert(torch.nn.Module):
    """A one-layer BERT as pytorch-pretrained-bert wrote it: position ids
    expanded over the batch, BertLayerNorm, gelu as x * 0.5 * (1 + erf(x /
    sqrt(2))), the intermediate and output dense layers."""

    def __init__(self):
        super().__init__()
        self.word = torch.nn.Embedding(30, D)
        self.position = torch.nn.Embedding(12, D)
        self.norm = OldLayerNorm()
        self.attention = Encoder()
        self.attention_norm = OldLayerNorm()
        self.intermediate = torch.nn.Linear(D, 24)
        self.output = torch.nn.Linear(24, D)
        self.output_norm = OldLayerNorm()

    def forward(self, input_ids, attention_mask):
        positions = torch.arange(input_ids.size(1), dtype=torch.long).unsqueeze(0).expand_as(input_ids)
        x = self.norm(self.word(input_ids) + self.position(positions))
        x = self.attention_norm(self.attention(x, attention_mask) + x)
        h = self.intermediate(x)
        h = h * 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0)))
        return self.output_norm(self.output(h) + x)


class Pruned(torch.nn.Module):
    """BERT attention with pruned heads (2 of 4 left), no mask."""

    with_mask = False

    def __init__(self):
        super().__init__()
        self.attention = BertAttention(heads=2)

    def forward(self, x, attention_mask):
        return self.attention(x, 0.0)


class EinsumAttention(torch.nn.Module):
    """Attention as Keras' MultiHeadAttention writes it (and tf2onnx
    exports it): EinsumDense projections into heads by (d, heads,
    head_dim) kernels with (heads, head_dim) biases, the scores and the
    weighted values as einsums, the output projection by a (heads,
    head_dim, d) kernel; the mask as BERT's."""

    def __init__(self, heads=4, head_dim=4):
        super().__init__()
        self.scale = 1 / math.sqrt(head_dim)
        for name in ("query", "key", "value"):
            setattr(self, name + "_kernel", torch.nn.Parameter(0.3 * torch.randn(D, heads, head_dim)))
            setattr(self, name + "_bias", torch.nn.Parameter(0.1 * torch.randn(heads, head_dim)))
        self.output_kernel = torch.nn.Parameter(0.3 * torch.randn(heads, head_dim, D))
        self.output_bias = torch.nn.Parameter(0.1 * torch.randn(D))

    def forward(self, x, attention_mask):
        q = torch.einsum("abc,cde->abde", x, self.query_kernel) + self.query_bias
        k = torch.einsum("abc,cde->abde", x, self.key_kernel) + self.key_bias
        v = torch.einsum("abc,cde->abde", x, self.value_kernel) + self.value_bias
        scores = torch.einsum("aecd,abcd->acbe", k, q * self.scale)
        extended = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        probs = torch.softmax(scores + extended, dim=-1)
        ctx = torch.einsum("acbe,aecd->abcd", probs, v)
        return torch.einsum("abcd,cde->abe", ctx, self.output_kernel) + self.output_bias


class BartAttention(torch.nn.Module):
    """BartAttention (also OPT's, Whisper's, Marian's), eager: the queries
    scaled after the projection, heads folded into the batch for bmm, the
    scores viewed as (B, H, T, S) to add the mask and back; the mask
    expanded and inverted as transformers' _expand_mask does (masked_fill
    with finfo.min)."""

    def __init__(self, heads=4):
        super().__init__()
        self.heads, self.head_dim = heads, D // heads
        self.q_proj, self.k_proj = torch.nn.Linear(D, D), torch.nn.Linear(D, D)
        self.v_proj, self.out_proj = torch.nn.Linear(D, D), torch.nn.Linear(D, D)

    def shape(self, x, b, t):
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, x, attention_mask):
        b, t, _ = x.shape
        q = self.q_proj(x) * self.head_dim ** -0.5
        fold = (b * self.heads, -1, self.head_dim)
        q = self.shape(q, b, t).view(*fold)
        k = self.shape(self.k_proj(x), b, t).view(*fold)
        v = self.shape(self.v_proj(x), b, t).view(*fold)
        w = torch.bmm(q, k.transpose(1, 2))
        expanded = attention_mask[:, None, None, :].expand(b, 1, t, t).to(torch.float32)
        inverted = 1.0 - expanded
        inverted = inverted.masked_fill(inverted.to(torch.bool), torch.finfo(torch.float32).min)
        w = (w.view(b, self.heads, t, t) + inverted).view(b * self.heads, t, t)
        a = torch.bmm(torch.softmax(w, dim=-1), v)
        a = a.view(b, self.heads, t, self.head_dim).transpose(1, 2).reshape(b, t, D)
        return self.out_proj(a)


class Decoder4DMask(torch.nn.Module):
    """Attention under the 4-D mask transformers' decoders build from the
    attention_mask (_prepare_4d_causal_attention_mask): finfo.min above the
    diagonal and at padded keys, 0 elsewhere, added to the scores."""

    def __init__(self):
        super().__init__()
        self.attn = BertAttention()

    def forward(self, x, attention_mask):
        b, t = attention_mask.shape
        low = torch.finfo(torch.float32).min
        causal = torch.triu(torch.full((t, t), low), diagonal=1)
        mask = causal[None, None, :, :].expand(b, 1, t, t)
        mask = mask.masked_fill(attention_mask[:, None, None, :].eq(0), low)
        return self.attn(x, mask)


class GroupedQueryAttention(torch.nn.Module):
    """LlamaAttention's grouped-query attention, eager, without RoPE: 4
    query heads over 2 key and value heads, repeated by repeat_kv (expand
    and reshape), causal by a mask buffer, no biases."""

    with_mask = False

    def __init__(self, heads=4, kv_heads=2, context=8):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, D // heads
        self.q_proj = torch.nn.Linear(D, D, bias=False)
        self.k_proj = torch.nn.Linear(D, kv_heads * self.head_dim, bias=False)
        self.v_proj = torch.nn.Linear(D, kv_heads * self.head_dim, bias=False)
        self.o_proj = torch.nn.Linear(D, D, bias=False)
        self.register_buffer("mask", torch.triu(torch.ones(context, context, dtype=torch.bool), diagonal=1))

    def repeat_kv(self, x):
        b, h, t, d = x.shape
        n_rep = self.heads // self.kv_heads
        return x[:, :, None, :, :].expand(b, h, n_rep, t, d).reshape(b, h * n_rep, t, d)

    def forward(self, x, attention_mask):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        w = w.masked_fill(self.mask[:t, :t], float("-inf"))
        a = torch.matmul(torch.softmax(w, dim=-1), v).transpose(1, 2).reshape(b, t, D)
        return self.o_proj(a)


CASES = {
    "int64_mask": (lambda: Encoder(), torch.int64, ["mask.padding", "attention.sdpa"]),
    "float_mask_finfo_min": (lambda: Encoder(fill=torch.finfo(torch.float32).min), torch.float32,
                             ["mask.padding", "attention.sdpa"]),
    "int32_mask_pruned_heads": (lambda: Encoder(heads=2), torch.int32, ["mask.padding", "attention.sdpa"]),
    "int64_mask_two_layers": (lambda: Encoder(layers=2), torch.int64,
                              ["mask.padding", "attention.sdpa", "nn.add", "attention.sdpa", "nn.add"]),
    "gpt2_masked_bias": (lambda: GPT2(with_mask=False), torch.int64, ["attention.multihead"]),
    "gpt2_finfo_min": (lambda: GPT2(with_mask=False, fill=torch.finfo(torch.float32).min), torch.int64,
                       ["attention.multihead"]),
    "gpt2_attention_mask": (lambda: GPT2(), torch.int64, ["mask.padding", "attention.sdpa"]),
    "embedded": (Embedded, torch.int64,
                 ["nn.embedding", "nn.embedding", "nn.add", "norm.layer", "mask.padding", "attention.sdpa"]),
    "old_bert": (OldBert, torch.int64,
                 ["nn.embedding", "position.learned", "norm.layer", "mask.padding", "attention.sdpa", "nn.add",
                  "norm.layer", "nn.mlp", "nn.add", "norm.layer"]),
    "pruned_heads_no_mask": (Pruned, torch.int64, ["attention.sdpa"]),
    "keras_einsum": (EinsumAttention, torch.int64, ["mask.padding", "attention.sdpa"]),
    "bart_bmm": (BartAttention, torch.int64, ["mask.padding", "attention.sdpa"]),
    "decoder_4d_mask": (Decoder4DMask, torch.int64, ["mask.padding", "attention.sdpa"]),
    "gqa_repeat_kv": (GroupedQueryAttention, torch.int64, ["attention.sdpa"]),
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
        inputs = {"x": x, "attention_mask": mask}
        if not getattr(module, "with_mask", True):  # the exporter drops an input the graph does not read
            del inputs["attention_mask"]
        if isinstance(module, (Embedded, OldBert)):
            ids = torch.randint(1, 30, (2, 5), generator=gen)
            ids[1, 3:] = 0  # padding
            inputs = {"input_ids": ids, "attention_mask": mask}
            if isinstance(module, Embedded):
                inputs["token_type_ids"] = (torch.arange(5) >= 2).long().expand(2, 5)
        axes = {name: {0: "batch", 1: "seq"} for name in [*inputs, "y"]}
        with torch.no_grad():
            args = tuple(inputs.values()) if isinstance(module, (Embedded, OldBert)) else (x, mask)
            torch.onnx.export(module, args, path, opset_version=14, input_names=list(inputs),
                              output_names=["y"], dynamic_axes=axes)
            y = module(*args)
        onnx.checker.check_model(onnx.load(path), full_check=True)
        tensors = [(f"input_{i}", name, value) for i, (name, value) in enumerate(inputs.items())]
        for file, tensor_name, value in tensors + [("output_0", "y", y)]:
            with open(os.path.join(folder, "test_data_set_0", file + ".pb"), "wb") as f:
                f.write(numpy_helper.from_array(value.numpy(), tensor_name).SerializeToString())
        manifest.append({"name": name, "layers": layers})
        print("ok ", name)
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
