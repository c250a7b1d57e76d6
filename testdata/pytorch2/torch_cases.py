"""PyTorch modules: nn.MultiheadAttention, F.scaled_dot_product_attention,
nn.TransformerEncoderLayer, and the seed classes of testdata/torch/modules.py.

The seed classes come with the cases testdata/torch/export_onnx.py exports
with PyTorch 1.13 (same builds, same inputs), imported, not copied, so the
two generations of fixtures hold the same modules.
"""

import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

from case import Case, randn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
import export_onnx  # noqa: E402  (testdata/torch: the seed classes' cases)

D_MODEL = 64
HEADS = 4
HEAD_DIM = D_MODEL // HEADS
KV_HEADS = 2

BTH = {0: "batch", 2: "sequence"}           # (batch, heads, sequence, head_dim)
BT = {0: "batch", 1: "sequence"}            # (batch, sequence, ...)


class SDPA(nn.Module):
    """F.scaled_dot_product_attention with fixed keyword arguments."""

    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, query, key, value):
        return F.scaled_dot_product_attention(query, key, value, **self.kwargs)


class MaskedSDPA(SDPA):
    """F.scaled_dot_product_attention with an attn_mask input."""

    def forward(self, query, key, value, attn_mask):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, **self.kwargs)


class SelfMHA(nn.Module):
    """nn.MultiheadAttention as self-attention over padded sequences."""

    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)

    def forward(self, x, key_padding_mask):
        return self.mha(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)[0]


class EncoderLayer(nn.Module):
    """nn.TransformerEncoderLayer (post-norm, ReLU) over padded sequences."""

    def __init__(self, norm_first):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, dim_feedforward=2 * D_MODEL,
                                                batch_first=True, norm_first=norm_first)

    def forward(self, x, src_key_padding_mask):
        return self.layer(x, src_key_padding_mask=src_key_padding_mask)


def qkv(gen, batch, q_len, kv_len, q_heads=HEADS, kv_heads=HEADS):
    return {"query": randn(gen, batch, q_heads, q_len, HEAD_DIM),
            "key": randn(gen, batch, kv_heads, kv_len, HEAD_DIM),
            "value": randn(gen, batch, kv_heads, kv_len, HEAD_DIM)}


def keep_mask(gen, *shape):
    """A bool mask, True where attention is allowed, at least one True per row."""
    mask = torch.rand(*shape, generator=gen) < 0.7
    mask[..., 0] = True
    return mask


def padding(lengths, total):
    """A bool key padding mask: True on the padding after lengths[b]."""
    return torch.arange(total).unsqueeze(0) >= torch.tensor(lengths).unsqueeze(1)


def sdpa_cases():
    def causal(module, gen):
        return [qkv(gen, 2, 6, 6), qkv(gen, 1, 4, 4)]

    def bool_mask(module, gen):
        # Cross-attention shapes: 5 queries, 7 keys; the mask broadcasts over heads.
        return [dict(qkv(gen, 2, 5, 7), attn_mask=keep_mask(gen, 2, 1, 5, 7)),
                dict(qkv(gen, 1, 3, 4), attn_mask=keep_mask(gen, 1, 1, 3, 4))]

    def float_mask(module, gen):
        # An additive bias per head, -inf at some positions (never a whole row).
        def bias(b, t, s):
            return randn(gen, b, HEADS, t, s).masked_fill(~keep_mask(gen, b, HEADS, t, s), float("-inf"))
        return [dict(qkv(gen, 2, 6, 6), attn_mask=bias(2, 6, 6)),
                dict(qkv(gen, 1, 4, 4), attn_mask=bias(1, 4, 4))]

    def gqa(module, gen):
        return [qkv(gen, 2, 6, 6, kv_heads=KV_HEADS), qkv(gen, 1, 4, 4, kv_heads=KV_HEADS)]

    self_axes = {"query": BTH, "key": BTH, "value": BTH, "y": BTH}
    cross_axes = {"query": BTH, "key": {0: "batch", 2: "kv_sequence"}, "value": {0: "batch", 2: "kv_sequence"},
                  "y": BTH}
    f = "torch.nn.functional.scaled_dot_product_attention"
    return [
        Case("sdpa_causal", f"{f}(is_causal=True)", lambda: SDPA(is_causal=True), causal, ["y"], self_axes),
        Case("sdpa_bool_mask", f"{f} with a bool attn_mask (batch, 1, 5, 7), 5 queries over 7 keys",
             MaskedSDPA, bool_mask, ["y"],
             dict(cross_axes, attn_mask={0: "batch", 2: "sequence", 3: "kv_sequence"})),
        Case("sdpa_float_mask", f"{f} with an additive float attn_mask per head (-inf at some keys), "
             "scale=0.3", lambda: MaskedSDPA(scale=0.3), float_mask, ["y"],
             dict(self_axes, attn_mask={0: "batch", 2: "sequence", 3: "sequence"})),
        Case("sdpa_gqa", f"{f}(is_causal=True, enable_gqa=True), {HEADS} query heads over {KV_HEADS} KV heads",
             lambda: SDPA(is_causal=True, enable_gqa=True), gqa, ["y"], self_axes,
             export_failures={"ts17": "the TorchScript exporter has no conversion for enable_gqa=True "
                                      "(\"conversion of scaled_dot_product_attention not implemented if "
                                      "enable_gqa is True\")"}),
    ]


# The TorchScript exporter of PyTorch 2.15 traces nn.MultiheadAttention's
# batch * heads and lengths as constants (PyTorch 1.13's did not).
FROZEN_MHA = {"ts17": "the TorchScript export of nn.MultiheadAttention bakes the example's batch and "
                      "lengths into a Reshape (ONNX Runtime: \"The input tensor cannot be reshaped\")"}


def padded_sequences(module, gen):
    """Set 0: batch 2 of 6, the second row padded after 4. Set 1: one row of 4."""
    return [{"x": randn(gen, 2, 6, D_MODEL), "mask": padding([6, 4], 6)},
            {"x": randn(gen, 1, 4, D_MODEL), "mask": padding([4], 4)}]


def module_cases():
    padded_axes = {"x": BT, "mask": BT, "y": BT}
    return [
        Case("mha_padding", f"torch.nn.MultiheadAttention({D_MODEL}, {HEADS}, batch_first=True) self-attention, "
             "bool key_padding_mask, need_weights=False", SelfMHA, padded_sequences, ["y"], padded_axes,
             frozen_shapes=FROZEN_MHA),
        Case("encoder_layer", f"torch.nn.TransformerEncoderLayer({D_MODEL}, {HEADS}, dim_feedforward={2 * D_MODEL}, "
             "batch_first=True) post-norm, ReLU, bool src_key_padding_mask",
             lambda: EncoderLayer(norm_first=False), padded_sequences, ["y"], padded_axes,
             frozen_shapes=FROZEN_MHA),
        Case("encoder_layer_prenorm", f"torch.nn.TransformerEncoderLayer({D_MODEL}, {HEADS}, "
             f"dim_feedforward={2 * D_MODEL}, batch_first=True, norm_first=True), bool src_key_padding_mask",
             lambda: EncoderLayer(norm_first=True), padded_sequences, ["y"], padded_axes,
             frozen_shapes=FROZEN_MHA),
    ]


def seed_cases():
    """The cases of testdata/torch/export_onnx.py (the seed notebooks' classes,
    nn.MultiheadAttention wrappers, a transformer block), with their data
    sets: (batch 2, sequence 6) and (3, 4)."""
    def data_sets(c):
        return lambda module, gen: [c.inputs(gen, b, t) for b, t in export_onnx.SHAPES]

    def build(c):
        return lambda: c.build()
    return [Case(f"modules_{c.name}",
                 f"testdata/torch/modules.py {type(c.build()).__name__}, as testdata/torch/export_onnx.py "
                 f"case {c.name!r} builds it", build(c), data_sets(c), c.outputs, c.axes,
                 frozen_shapes=FROZEN_MHA if c.name.startswith("torch_mha") else {})
            for c in export_onnx.CASES]


def torch_cases():
    return sdpa_cases() + module_cases() + seed_cases()
