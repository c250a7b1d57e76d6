#!/usr/bin/python3
"""Replays the seed notebooks and writes attnrun's built-in presets.

Usage, from the repository root (Debian's python3-torch; not plain python3):

    /usr/bin/python3 testdata/torch/seeds.py [--out models/presets]

For each seed notebook (../shared/seeds/NNN_*.txt) the script repeats the
cells that draw random numbers, under the notebook's seeds and in the
notebook's order, builds the equivalent modules.py module from the drawn
numbers, and asserts that every tensor the notebook prints for those cells
(notebook_prints.py) is reproduced to the printed 4 decimals. Any mismatch
stops the script before it writes anything.

It then writes, per preset, models/presets/<name>/ with model.yaml,
weights.npz (keys = attnrun parameter names, float32), input.npy and
expected.npy (float32), plus models/presets/index.yaml, in the layout of
notes/formats.md. The files are written deterministically (no timestamps),
so re-running the script leaves git clean.
"""

import argparse
import dataclasses
import io
import json
import os
import re
import shutil
import sys
import tempfile
import zipfile

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import JOURNEY, SENTENCE  # noqa: E402
from modules import (CausalAttention, CausalAverage, MultiHeadAttention,  # noqa: E402
                     MultiHeadWrapper, PositionalAttention, PositionalHeads,
                     SelfAttention, SelfAttentionMatrix, SimpleAttention, future_mask)
from notebook_prints import PRINTED  # noqa: E402

# The printed tensors carry 4 decimals, so a faithful replay is within half a
# unit of the last printed digit.
PRINT_TOLERANCE = 5e-5


@dataclasses.dataclass
class Preset:
    """One preset: its config, its weights and the example it is checked on."""
    name: str
    source: str          # notebook and cell, e.g. "000 In[17]"
    description: str     # one line, naming the cell and any documented difference
    layers: list         # model.yaml layers: dicts with name, type, [inputs], fields
    input: torch.Tensor
    expected: torch.Tensor
    weights: dict = dataclasses.field(default_factory=dict)  # parameter name -> tensor
    attention: str = ""  # layer whose weights `attnrun run` prints (expected holds them)
    printed: str = ""    # PRINTED key of the notebook's print of `expected`, if any


# ---------------------------------------------------------------- checking

checked = set()


def check(key, computed):
    """Asserts that computed equals what the notebook printed under key."""
    want = np.asarray(PRINTED[key], dtype=np.float64)
    got = np.asarray(torch.as_tensor(computed).detach(), dtype=np.float64)
    if got.shape != want.shape:
        fail(f"{key}: shape {got.shape}, notebook printed {want.shape}")
    finite = np.isfinite(want)
    if not np.array_equal(np.isfinite(got), finite) or not np.array_equal(got[~finite], want[~finite]):
        fail(f"{key}: -inf entries differ from the notebook's\n got {got}\nwant {want}")
    diff = np.abs(got[finite] - want[finite]).max(initial=0.0)
    if diff > PRINT_TOLERANCE:
        fail(f"{key}: max |diff| {diff:.2e} > {PRINT_TOLERANCE}\n got {np.round(got, 4)}\nwant {want}")
    checked.add(key)
    print(f"ok  {key:<58} {str(want.shape):<10} max |diff| {diff:.1e}")


def check_close(what, got, want, atol=1e-6):
    """Asserts two computations of the same thing agree to float32 rounding."""
    if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-5, atol=atol):
        fail(f"{what}: the two computations differ\n{got}\n{want}")
    print(f"ok  {what}")


def fail(message):
    raise SystemExit(f"seeds.py: MISMATCH: {message}")


def params(module, layer):
    """The module's parameters under attnrun's names, prefixed with the layer name."""
    return {f"{layer}.{n}": p for n, p in module.named_parameters()}


# ------------------------------------------------------------ notebook 000

def notebook_000():
    presets = []
    x = JOURNEY

    # In[2]..In[17]: attention without weights.
    simple = SimpleAttention()
    out = simple(x)
    check("000 In[2] attn_scores_2", x @ x[1])
    check("000 In[14] attn_weights", simple.attention_weights)
    check("000 In[17] all_context_vecs", out)
    presets.append(Preset(
        "seed-simple", "000 In[17]",
        "Attention without weights, softmax(X X^T) X, on the six 'Your journey starts "
        "with one step' embeddings (000 In[17]).",
        [{"name": "attn", "type": "attention.simple"}], x, out,
        printed="000 In[17] all_context_vecs"))

    # In[33] draws three torch.rand(3, 2) matrices after seed 123; In[36]
    # re-seeds 123 and SelfAttention_v1 draws the same three, in the same order.
    torch.manual_seed(123)
    v1 = SelfAttentionMatrix(3, 2)
    queries, keys, values = x @ v1.W_query, x @ v1.W_key, x @ v1.W_value
    check("000 In[33] query_2", queries[1])
    check("000 In[29] attn_scores_2", queries[1] @ keys.T)
    weights_2 = torch.softmax(queries[1] @ keys.T / 2 ** 0.5, dim=0)
    check("000 In[30] attn_weights_2", weights_2)
    check("000 In[31] context_vec_2", weights_2 @ values)
    out = v1(x)
    check("000 In[36] ea_v1(inputs)", out)
    presets.append(Preset(
        "seed-self-attention-v1", "000 In[36], 004 In[89]",
        "Self-attention with bare (d_in, d_out) matrices drawn by torch.rand after "
        "manual_seed(123) (000 In[36], 004 In[89]).",
        [{"name": "attn", "type": "attention.self", "d_in": 3, "d_out": 2, "weights": "matrix"}],
        x, out, params(v1, "attn"), printed="000 In[36] ea_v1(inputs)"))

    # In[47]: nn.Linear projections (query, key, value) after seed 789.
    torch.manual_seed(789)
    v2 = SelfAttention(3, 2)
    out = v2(x)
    check("000 In[47] sa_v2(inputs)", out)
    presets.append(Preset(
        "seed-self-attention-v2", "000 In[47]",
        "Self-attention with nn.Linear projections initialized after manual_seed(789) (000 In[47]).",
        [{"name": "attn", "type": "attention.self", "d_in": 3, "d_out": 2}],
        x, out, params(v2, "attn"), printed="000 In[47] sa_v2(inputs)"))

    # In[48] copies v1's matrices into v2's Linear layers, transposed to the
    # (out, in) layout; In[49]..In[57] mask that model's scores.
    copied = {"W_query.weight": v1.W_query.T, "W_key.weight": v1.W_key.T,
              "W_value.weight": v1.W_value.T}
    plain = SelfAttention(3, 2)
    causal = SelfAttention(3, 2, causal=True)
    for m in (plain, causal):
        m.load_state_dict(copied)
    check("000 In[48] sa_v2(inputs) with v1 weights", plain(x))
    check("000 In[49] attn_weights", plain.attention_weights)
    scores = plain.W_query(x) @ plain.W_key(x).T
    check("000 In[57] masked", scores.masked_fill(future_mask(6), float("-inf")))
    causal(x)
    check("000 In[52] masked_simple_norm", causal.attention_weights)
    check("000 In[57] attn_weights", causal.attention_weights)
    presets.append(Preset(
        "seed-masked-weights", "000 In[57]",
        "Causal attention weights (-inf mask, then softmax) of the In[48] model: nn.Linear "
        "weights set to the seed-123 matrices, transposed (000 In[57]).",
        [{"name": "attn", "type": "attention.self", "d_in": 3, "d_out": 2, "causal": True}],
        x, causal.attention_weights, params(causal, "attn"), attention="attn",
        printed="000 In[57] attn_weights"))

    # In[58]: dropout masks come from torch's own generator, which attnrun does
    # not replicate, so this is checked here but is no preset.
    torch.manual_seed(123)
    dropout = nn.Dropout(0.5)
    check("000 In[58] dropout(example)", dropout(torch.ones(6, 6)))
    check("000 In[58] dropout(attn_weights)", dropout(causal.attention_weights))

    # In[66]: two causal heads after seed 123 on a batch of two copies.
    torch.manual_seed(123)
    wrapper = MultiHeadWrapper(3, 2, 6, 2)
    batch = torch.stack((x, x))
    out = wrapper(batch)
    check("000 In[66] context_vecs", out)
    presets.append(Preset(
        "seed-mha-wrapper", "000 In[66]",
        "Two independent causal heads (d_out 2 each, seed 123) concatenated, on a batch of "
        "two copies of the input (000 In[66]).",
        [{"name": "attn", "type": "attention.multihead_wrapper", "d_in": 3, "d_out": 2,
          "context_length": 6, "num_heads": 2, "dropout": 0.0}],
        batch, out, params(wrapper, "attn"), printed="000 In[66] context_vecs"))
    return presets


# ------------------------------------------------------------ notebook 001

def positional_heads_params(module):
    """PositionalHeads' parameters under the layer names of its preset's config."""
    renamed = {}
    for name, p in module.named_parameters():
        name = re.sub(r"^heads\.(\d+)\.attn\.", r"head\1.", name)
        name = re.sub(r"^heads\.(\d+)\.pos\.", r"pos\1.", name)
        renamed[name] = p
    return renamed


def head_scores(head, x):
    """Unscaled q k^T of a PositionalAttention(CausalAttention) head, as 001 prints it."""
    xp = head.pos(x)
    return head.attn.W_query(xp) @ head.attn.W_key(xp).T


def notebook_001():
    presets = []
    x = SENTENCE
    # In[1] seeds 239 once; In[4], In[5], In[6], In[7] and In[9] then draw
    # from that one stream, in this order.
    torch.manual_seed(239)

    simple = SimpleAttention()
    out = simple(x)
    check("001 In[3] X", x)
    check("001 In[3] A_star", x @ x.T)
    check("001 In[3] A", simple.attention_weights)
    check("001 In[3] Y", out)
    presets.append(Preset(
        "seed-bishop-simple", "001 In[3]",
        "Attention without weights, softmax(X X^T) X, on the five-token example (001 In[3], Y).",
        [{"name": "attn", "type": "attention.simple"}], x, out, printed="001 In[3] Y"))

    attn = SelfAttention(3, 3)
    out = attn(x)
    check("001 In[4] attention_weights", attn.attention_weights)
    check("001 In[4] output", out)
    presets.append(Preset(
        "seed-bishop-self-attention", "001 In[4]",
        "Self-attention with nn.Linear projections (d 3), drawn from the seed-239 stream "
        "(001 In[4]).",
        [{"name": "attn", "type": "attention.self", "d_in": 3, "d_out": 3}],
        x, out, params(attn, "attn"), printed="001 In[4] output"))

    positional = PositionalAttention(SelfAttention(3, 3), 5, 3)
    out = positional(x)
    check("001 In[5] attention_weights", positional.attention_weights)
    check("001 In[5] output", out)
    presets.append(Preset(
        "seed-bishop-positional", "001 In[5]",
        "Learned position embedding added to the input, then self-attention, continuing "
        "the seed-239 stream (001 In[5]).",
        [{"name": "pos", "type": "position.learned", "context_length": 5, "d": 3},
         {"name": "attn", "type": "attention.self", "d_in": 3, "d_out": 3}],
        x, out, dict(positional.named_parameters()), printed="001 In[5] output"))

    causal = PositionalAttention(CausalAttention(3, 3, 5), 5, 3)
    causal(x)
    scores = head_scores(causal, x)
    masked = scores.masked_fill(future_mask(5), float("-inf"))
    check("001 In[6] scores before masking", scores)
    check("001 In[6] scores after masking", masked)
    check('001 In[6] "constrained masked attention weights"', masked)
    check_close("001 In[6] weights = softmax(masked scores / sqrt(3))",
                causal.attention_weights, torch.softmax(masked / 3 ** 0.5, dim=-1))
    presets.append(Preset(
        "seed-bishop-causal", "001 In[6]",
        "Position embedding then causal attention (001 In[6]); shows the true attention "
        "weights: the notebook's 'Constrained masked attention weights' print is the masked "
        "scores again (bug).",
        [{"name": "pos", "type": "position.learned", "context_length": 5, "d": 3},
         {"name": "attn", "type": "attention.causal", "d_in": 3, "d_out": 3,
          "context_length": 5, "dropout": 0.0}],
        x, causal.attention_weights, dict(causal.named_parameters()), attention="attn"))

    heads = PositionalHeads(3, 3, 5, 2)
    out = heads(x)
    scores = head_scores(heads.heads[0], x)
    masked = scores.masked_fill(future_mask(5), float("-inf"))
    check("001 In[7] head 0 scores before masking", scores)
    check("001 In[7] head 0 scores after masking", masked)
    check('001 In[7] head 0 "constrained masked attention weights"', masked)
    layers = []
    for h in range(2):
        layers += [{"name": f"pos{h}", "type": "position.learned", "inputs": ["x"],
                    "context_length": 5, "d": 3},
                   {"name": f"head{h}", "type": "attention.causal", "d_in": 3, "d_out": 3,
                    "context_length": 5, "dropout": 0.0}]
    layers += [{"name": "concat", "type": "nn.concat", "inputs": ["head0", "head1"]},
               {"name": "out_proj", "type": "nn.linear", "d_in": 6, "d_out": 3, "bias": False}]
    presets.append(Preset(
        "seed-bishop-multihead-concat", "001 In[7]",
        "Two causal heads, each adding its own position embedding, concatenated, then a "
        "bias-free projection (001 In[7], output not printed there); the notebook sizes W_o "
        "from num_heads*d_in, not num_heads*d_out, harmless only as d_in == d_out.",
        layers, x, out, positional_heads_params(heads)))

    inputs = torch.rand(5, 6)
    mha = MultiHeadAttention(6, 6, 5, 2)
    out = mha(inputs)
    check("001 In[9] output", as_printed_in_001(mha, inputs))
    check_close("001 In[9] split heads = per-head attention on weight slices, then out_proj",
                out, per_head_reference(mha, inputs))
    presets.append(Preset(
        "seed-bishop-multihead", "001 In[9]",
        "Split-heads causal multi-head attention (2 heads, out_proj with bias) on seed-239 "
        "torch.rand inputs (001 In[9]); differs from the print: the notebook's transpose(1, 2) "
        "on unbatched heads mixes tokens (bug).",
        [{"name": "attn", "type": "attention.multihead", "d_in": 6, "d_out": 6,
          "context_length": 5, "num_heads": 2, "dropout": 0.0}],
        inputs, out, params(mha, "attn")))
    return presets


def as_printed_in_001(mha, x):
    """What 001 In[8]'s MultiHeadAttention computes on an unbatched (T, d) input.

    Its heads are (H, T, head_dim) there, but it merges them with
    transpose(1, 2), written for (B, H, T, head_dim): that yields
    (H, head_dim, T), whose memory .view(T, d_out) then reads row-wise, so
    each output row mixes several tokens. The printed numbers come from this;
    the preset keeps the correct merge (modules.MultiHeadAttention).
    """
    t, h, hd = x.shape[0], mha.num_heads, mha.head_dim

    def heads(y):
        return y.view(t, h, hd).transpose(0, 1)

    scores = heads(mha.W_query(x)) @ heads(mha.W_key(x)).transpose(-2, -1)
    weights = torch.softmax(scores.masked_fill(future_mask(t), float("-inf")) / hd ** 0.5, dim=-1)
    return mha.out_proj((weights @ heads(mha.W_value(x))).transpose(1, 2).contiguous().view(t, h * hd))


def per_head_reference(mha, x):
    """Multi-head attention as separate causal heads on slices of the projections."""
    hd = mha.head_dim
    contexts = []
    for i in range(mha.num_heads):
        cols = slice(i * hd, (i + 1) * hd)
        head = CausalAttention(x.shape[-1], hd, mha.context_length).eval()
        head.load_state_dict({f"{w}.weight": getattr(mha, w).weight[cols]
                              for w in ("W_query", "W_key", "W_value")})
        contexts.append(head(x))
    return mha.out_proj(torch.cat(contexts, dim=-1))


# ------------------------------------------------------------ notebook 002

def notebook_002():
    presets = []
    average = CausalAverage()

    # In[2]: seed 1337, x = randn(4, 8, 2); In[4], In[13], In[22] average it
    # three ways, and In[13] prints that the first two agree: allclose True.
    # Here that needs atol 1e-7 rather than the default 1e-8: at xbow[1, 5, 1]
    # (about 0.0020) the loop's mean and the tril matmul sum in different
    # orders and differ by 3.2e-8 on this BLAS.
    torch.manual_seed(1337)
    x = torch.randn(4, 8, 2)
    loop = torch.stack([torch.stack([x[b, :t + 1].mean(dim=0) for t in range(8)])
                        for b in range(4)])
    tril = torch.tril(torch.ones(8, 8))
    by_tril = (tril / tril.sum(dim=1, keepdim=True)) @ x
    by_softmax = torch.softmax(torch.zeros(8, 8).masked_fill(tril == 0, float("-inf")), dim=-1) @ x
    if not torch.allclose(loop, by_tril, atol=1e-7):
        fail("002 In[13]: torch.allclose(xbow, xbow2) printed True")
    out = average(x)
    check_close("002 In[4] loop average equals ours", loop, out)
    check_close("002 In[22] softmax average equals ours", by_softmax, out)
    presets.append(Preset(
        "seed-bag-of-words-batch", "002 In[4], In[13], In[22]",
        "Causal running mean of randn(4, 8, 2) after manual_seed(1337); equals the notebook's "
        "loop, tril and softmax versions (002 In[4], In[13], In[22]).",
        [{"name": "avg", "type": "attention.average"}], x, out))

    # In[12]: seed 42, the a @ b example.
    torch.manual_seed(42)
    b = torch.randint(0, 10, (3, 2)).float()
    c = average(b)
    check("002 In[12] a", average.attention_weights)
    check("002 In[12] b", b)
    check("002 In[12] c", c)
    presets.append(Preset(
        "seed-bag-of-words", "002 In[12]",
        "Causal running mean (the tril/softmax trick) of the seed-42 randint example: "
        "c = a @ b (002 In[12]).",
        [{"name": "avg", "type": "attention.average"}], b, c, printed="002 In[12] c"))

    # In[27]: seed 1337, x = randn(4, 8, 32), then key, query, value Linear
    # layers in that order. The cell computes q k^T and then overwrites wei
    # with the uniform causal matrix, so its `out` is an average of v.
    torch.manual_seed(1337)
    x = torch.randn(4, 8, 32)
    key = nn.Linear(32, 16, bias=False)
    query = nn.Linear(32, 16, bias=False)
    value = nn.Linear(32, 16, bias=False)
    k = key(x)
    overwritten = torch.softmax(torch.zeros(8, 8).masked_fill(torch.tril(torch.ones(8, 8)) == 0,
                                                              float("-inf")), dim=-1)
    check("002 In[28] k.var()", k.var())
    check("002 In[29] wei.var()", overwritten.var())
    check_close("002 In[27] the cell's out is the causal average of v",
                overwritten @ value(x), average(value(x)))
    head = SelfAttention(32, 16, causal=True, scaled=False)
    head.load_state_dict({"W_query.weight": query.weight, "W_key.weight": key.weight,
                          "W_value.weight": value.weight})
    out = head(x)
    check_close("002 In[27] intended head = softmax(masked q k^T) v",
                out, torch.softmax((query(x) @ k.transpose(-2, -1)).masked_fill(
                    future_mask(8), float("-inf")), dim=-1) @ value(x))
    presets.append(Preset(
        "seed-head-1337", "002 In[27]",
        "The causal head 002 In[27] meant, softmax(masked q k^T) v, unscaled, seed-1337 "
        "weights; the notebook overwrites wei with zeros, so its out is the causal average of v.",
        [{"name": "head", "type": "attention.self", "d_in": 32, "d_out": 16,
          "causal": True, "scaled": False}],
        x, out, params(head, "head")))
    return presets


# ------------------------------------------------------------ notebook 003

def notebook_003():
    x = JOURNEY
    # In[3]: seed 1, three torch.randn(3, 2) matrices, query, key, value.
    torch.manual_seed(1)
    attn = SelfAttentionMatrix(3, 2, init=torch.randn)
    check("003 In[4] W_q", attn.W_query)
    check("003 In[5] W_k", attn.W_key)
    check("003 In[6] W_v", attn.W_value)
    queries, keys, values = x @ attn.W_query, x @ attn.W_key, x @ attn.W_value
    check("003 In[7] query_2", x[1] @ attn.W_query)
    check("003 In[7] key_2", x[1] @ attn.W_key)
    check("003 In[7] value_2", x[1] @ attn.W_value)
    check("003 In[8] keys", keys)
    check("003 In[8] queries", queries)
    check("003 In[8] values", values)
    check("003 In[9] attention_scores_2", queries[1] @ keys.T)
    check("003 In[10] attention_scores", queries @ keys.T)
    out = attn(x)
    check("003 In[13] attention_weights", attn.attention_weights)
    check("003 In[15] context_vectors", out)
    return [Preset(
        "seed-randn-weights", "003 In[15]",
        "Self-attention with bare weight matrices drawn by torch.randn after manual_seed(1) "
        "(003 In[15]).",
        [{"name": "attn", "type": "attention.self", "d_in": 3, "d_out": 2, "weights": "matrix"}],
        x, out, params(attn, "attn"), printed="003 In[15] context_vectors")]


# ------------------------------------------------------------ notebook 004

def notebook_004():
    x = JOURNEY
    # In[3]: seed 123, three torch.rand(3, 2) matrices (the 000 In[33] draws).
    torch.manual_seed(123)
    attn = SelfAttentionMatrix(3, 2)
    queries, keys, values = x @ attn.W_query, x @ attn.W_key, x @ attn.W_value
    check("004 In[49] attn_scores_2", queries[1] @ keys.T)
    check("004 In[51] attn_scores", queries @ keys.T)
    weights_2 = torch.softmax(queries[1] @ keys.T / 2 ** 0.5, dim=-1)
    check("004 In[56] attn_weights_2", weights_2)
    check("004 In[62] attn_weights_2 @ values", weights_2 @ values)

    # In[88] and In[94] each re-seed 123 before building their module.
    torch.manual_seed(123)
    check("004 In[89] sa_v1.forward()", SelfAttentionMatrix(3, 2)(x))
    torch.manual_seed(123)
    v2 = SelfAttention(3, 2)
    out = v2(x)
    check("004 In[95] SelfAttention_v2 forward()", out)
    return [Preset(
        "seed-self-attention-v2-123", "004 In[95]",
        "Self-attention with nn.Linear projections initialized after manual_seed(123) "
        "(004 In[95]).",
        [{"name": "attn", "type": "attention.self", "d_in": 3, "d_out": 2}],
        x, out, params(v2, "attn"), printed="004 In[95] SelfAttention_v2 forward()")]


# ------------------------------------------------- the formats.md contract

def linear_params(prefix, d_in, d_out, bias):
    names = [(f"{prefix}weight", (d_out, d_in))]
    return names + [(f"{prefix}bias", (d_out,))] if bias else names


def attention_params(prefix, d_in, d_out, bias):
    return [p for w in ("W_query", "W_key", "W_value")
            for p in linear_params(f"{prefix}{w}.", d_in, d_out, bias)]


# Per layer type: its config fields (formats.md) and its parameters, in
# state_dict order, as (name, shape).
LAYER_TYPES = {
    "attention.simple": ({"scaled", "causal"}, lambda c: []),
    "attention.self": (
        {"d_in", "d_out", "weights", "qkv_bias", "causal", "scaled"},
        lambda c: ([(w, (c["d_in"], c["d_out"])) for w in ("W_query", "W_key", "W_value")]
                   if c.get("weights", "linear") == "matrix"
                   else attention_params("", c["d_in"], c["d_out"], c.get("qkv_bias", False)))),
    "attention.causal": (
        {"d_in", "d_out", "context_length", "dropout", "qkv_bias"},
        lambda c: attention_params("", c["d_in"], c["d_out"], c.get("qkv_bias", False))),
    "attention.multihead_wrapper": (
        {"d_in", "d_out", "context_length", "num_heads", "dropout", "qkv_bias"},
        lambda c: [p for h in range(c["num_heads"])
                   for p in attention_params(f"heads.{h}.", c["d_in"], c["d_out"],
                                             c.get("qkv_bias", False))]),
    "attention.multihead": (
        {"d_in", "d_out", "context_length", "num_heads", "dropout", "qkv_bias", "out_bias",
         "causal"},
        lambda c: (attention_params("", c["d_in"], c["d_out"], c.get("qkv_bias", False))
                   + linear_params("out_proj.", c["d_out"], c["d_out"], c.get("out_bias", True)))),
    "attention.average": (set(), lambda c: []),
    "position.learned": ({"context_length", "d"},
                         lambda c: [("weight", (c["context_length"], c["d"]))]),
    "nn.linear": ({"d_in", "d_out", "bias"},
                  lambda c: linear_params("", c["d_in"], c["d_out"], c.get("bias", True))),
    "nn.concat": (set(), lambda c: []),
}


def check_contract(preset):
    """Asserts the preset's config and weights follow formats.md exactly.

    Also puts the weights in model order (layers in config order, each
    layer's parameters in state_dict order), the order weights.npz lists.
    """
    want, names = [], {"x"}
    for layer in preset.layers:
        name, kind = layer["name"], layer["type"]
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name in names:
            fail(f"{preset.name}: layer name {name!r} is malformed or repeated")
        fields, param_spec = LAYER_TYPES[kind]
        config = {k: v for k, v in layer.items() if k not in ("name", "type", "inputs")}
        if set(config) - fields:
            fail(f"{preset.name}: {name} ({kind}) has unknown fields {set(config) - fields}")
        for src in layer.get("inputs", []):
            if src not in names:
                fail(f"{preset.name}: {name} reads {src!r}, which no earlier layer makes")
        names.add(name)
        want += [(f"{name}.{p}", shape) for p, shape in param_spec(config)]
    got = {n: tuple(t.shape) for n, t in preset.weights.items()}
    if got != dict(want):
        fail(f"{preset.name}: weights {got}\n do not follow formats.md {want}")
    preset.weights = {n: preset.weights[n] for n, _ in want}


# ----------------------------------------------------------------- writing

def npy_bytes(tensor):
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(tensor.detach().numpy().astype(np.float32)))
    return buf.getvalue()


def write_npz(path, arrays):
    """Writes an .npz like numpy.savez, but with fixed timestamps: byte-stable."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, tensor in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, npy_bytes(tensor))


def yaml_scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if re.fullmatch(r"[a-z][a-z0-9_.-]*", value):
        return value
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def model_yaml(preset):
    lines = [HEADER, f"name: {preset.name}", f"description: {yaml_scalar(preset.description)}",
             "layers:"]
    for layer in preset.layers:
        lines.append(f"  - name: {layer['name']}")
        for key, value in layer.items():
            if key == "name":
                continue
            if isinstance(value, list):
                value = "[" + ", ".join(value) + "]"
            else:
                value = yaml_scalar(value)
            lines.append(f"    {key}: {value}")
    return "\n".join(lines) + "\n"


def yaml_tensor(values, indent):
    """A nested list as a YAML flow sequence, one innermost row per line."""
    if not isinstance(values[0], list):
        return "[" + ", ".join(f"{v:.4f}" for v in values) + "]"
    pad = " " * (indent + 1)
    return "[" + (",\n" + pad).join(yaml_tensor(v, indent + 1) for v in values) + "]"


def index_yaml(presets):
    lines = [HEADER]
    for p in presets:
        lines += [f"- name: {p.name}",
                  f"  description: {yaml_scalar(p.description)}",
                  f"  source: {json.dumps(p.source)}",
                  f"  attention: {json.dumps(p.attention)}"]
        if p.printed:
            lines.append("  printed:\n    " + yaml_tensor(PRINTED[p.printed], 4))
    return "\n".join(lines) + "\n"


HEADER = "# Generated by testdata/torch/seeds.py from the seed notebooks; do not edit."


def write(presets, out_dir):
    """Writes every preset into a fresh temp dir, then swaps it into out_dir."""
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".presets-", dir=parent)
    try:
        for p in presets:
            folder = os.path.join(tmp, p.name)
            os.mkdir(folder)
            with open(os.path.join(folder, "model.yaml"), "w") as f:
                f.write(model_yaml(p))
            if p.weights:
                write_npz(os.path.join(folder, "weights.npz"), p.weights)
            with open(os.path.join(folder, "input.npy"), "wb") as f:
                f.write(npy_bytes(p.input))
            with open(os.path.join(folder, "expected.npy"), "wb") as f:
                f.write(npy_bytes(p.expected))
        with open(os.path.join(tmp, "index.yaml"), "w") as f:
            f.write(index_yaml(presets))
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def main():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(repo, "models", "presets"),
                        help="preset folder to (re)write (default: %(default)s)")
    args = parser.parse_args()

    torch.set_grad_enabled(False)
    presets = (notebook_000() + notebook_001() + notebook_002() + notebook_003()
               + notebook_004())
    unchecked = [k for k in PRINTED if k not in checked]
    if unchecked:
        fail(f"printed tensors never checked: {unchecked}")
    for p in presets:
        check_contract(p)
    write(presets, args.out)
    print(f"wrote {len(presets)} presets to {args.out}; all {len(checked)} printed tensors match")


if __name__ == "__main__":
    main()
