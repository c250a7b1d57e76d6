"""PyTorch references for attnrun's modern layers and transformer blocks.

PyTorch 1.13 (Debian's) has no F.scaled_dot_product_attention, so the
attention here is written out as formulas, the way the PyTorch 2.x and
Hugging Face documentation define them; nn.MultiheadAttention, nn.LayerNorm
and nn.GELU are PyTorch's own modules.

Writes
  layers/testdata/modern_cases.json     one case per layer configuration:
      type, config   the attnrun layer ID and its YAML fields
      params         the module's state_dict(), names in order
      inputs         the layer's inputs in attnrun's order (bool masks as 0/1)
      output         PyTorch's output (NaN as null, ±Inf as "inf" and "-inf")
      weights        attention weights as the attnrun hook reports them, if any
  models/testdata/blocks/<name>/        weights.npz, input_<k>.npy, expected.npy
      for the YAML configs models/testdata/blocks/<name>/model.yaml

Run from the repository root with Debian's PyTorch:
    /usr/bin/python3 testdata/torch/modern.py
The output is deterministic (re-running leaves git clean).

The live cross-check (scripts/modern_crosscheck.sh) draws fresh references:
    /usr/bin/python3 testdata/torch/modern.py --seed N --out DIR
writes DIR/modern_cases.json and DIR/blocks/<name>/ (with a copy of the
block's model.yaml) from seeds shifted by N, and leaves the committed files
alone; ATTNRUN_MODERN_CASES=DIR/modern_cases.json go test ./layers -run Live
checks attnrun against them.
"""

import argparse
import copy
import io
import json
import math
import os
import shutil
import zipfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NEG_INF = float("-inf")

# Every case draws its numbers from seed(k) for its own k; SEED_OFFSET
# shifts them all. 0 gives the committed references; --seed N sets it to
# 100·N (the cases' own seeds stay below 100, so no two runs share one).
SEED_OFFSET = 0


def seed(k):
    torch.manual_seed(k + SEED_OFFSET)


# ------------------------------------------------------------ attention math

def alibi_slopes(n):
    """ALiBi's slopes for n heads (Press et al.'s reference code)."""
    def power_of_two(n):
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]
    p = 2 ** math.floor(math.log2(n))
    slopes = power_of_two(p)
    if p < n:
        slopes += power_of_two(2 * p)[0::2][: n - p]
    return torch.tensor(slopes, dtype=torch.float32)


def rotate(x, pos, style, base, rotary_dim):
    """Rotary embedding of x (..., T, head_dim) at positions pos (T,).

    The angles are computed in float64 and rounded once, as attnrun does.
    "half" pairs dimension i with i + r/2 (GPT-NeoX, Llama's rotate_half);
    "interleaved" pairs 2i with 2i+1 (GPT-J). Dimensions past r pass through.
    """
    r = rotary_dim or x.shape[-1]
    half = r // 2
    theta = base ** (-2 * torch.arange(half, dtype=torch.float64) / r)
    angle = pos.to(torch.float64)[:, None] * theta[None, :]
    cos, sin = angle.cos().float(), angle.sin().float()
    xr, rest = x[..., :r], x[..., r:]
    if style == "half":
        a, b = xr[..., :half], xr[..., half:]
        out = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    else:
        a, b = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
    return torch.cat([out, rest], dim=-1)


def attend(q, k, v, *, scale, causal=False, align="bottom_right", window=0, softcap=0.0,
           slopes=None, mask=None, mask_kind=None, masked_rows="zeros"):
    """Scaled dot-product attention of q (B, H, Tq, hd) over k, v (B, Hkv, Tk, hd).

    Query head h reads KV head h // (H / Hkv). Returns (output, weights).
    """
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = (q @ k.transpose(-2, -1)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    tq, tk = s.shape[-2:]
    qpos = torch.arange(tq) + (tk - tq if align == "bottom_right" else 0)
    kpos = torch.arange(tk)
    hidden = torch.zeros(tq, tk, dtype=torch.bool)
    if causal:
        hidden |= kpos[None, :] > qpos[:, None]
    if window and causal:
        hidden |= qpos[:, None] - kpos[None, :] >= window
    elif window:  # centred on the query: (window - 1) // 2 keys on either side
        hidden |= (qpos[:, None] - kpos[None, :]).abs() > (window - 1) // 2
    if slopes is not None:
        s = s + slopes[:, None, None] * (kpos[None, :] - qpos[:, None]).float()
    if mask is not None:
        if mask_kind == "keep":
            s = s.masked_fill(mask == 0, NEG_INF)
        elif mask_kind == "mask":
            s = s.masked_fill(mask != 0, NEG_INF)
        else:
            s = s + mask
    s = s.masked_fill(hidden, NEG_INF)
    w = torch.softmax(s, dim=-1)
    if masked_rows == "zeros":
        w = torch.nan_to_num(w, nan=0.0)
    return w @ v, w


class SDPAttention(nn.Module):
    """attention.sdpa: q/k/v projections, attend(), output projection.

    The module layout (q_proj, k_proj, v_proj, out_proj or o_proj) is Hugging
    Face's LlamaAttention's; the options are attention.sdpa's fields.
    """

    def __init__(self, d, num_heads, num_kv_heads=0, head_dim=0, d_memory=0, qkv_bias=False,
                 out_bias=True, out_name="out_proj", rope=None, rope_base=10000.0,
                 rope_rotary_dim=0, alibi=False, **options):
        super().__init__()
        self.h, self.hkv = num_heads, num_kv_heads or num_heads
        self.hd = head_dim or d // num_heads
        self.q_proj = nn.Linear(d, self.h * self.hd, bias=qkv_bias)
        self.k_proj = nn.Linear(d_memory or d, self.hkv * self.hd, bias=qkv_bias)
        self.v_proj = nn.Linear(d_memory or d, self.hkv * self.hd, bias=qkv_bias)
        self.out_name = out_name
        setattr(self, out_name, nn.Linear(self.h * self.hd, d, bias=out_bias))
        self.rope = (rope, rope_base, rope_rotary_dim) if rope else None
        self.slopes = alibi_slopes(num_heads) if alibi else None
        self.options = options
        self.options.setdefault("scale", 1 / math.sqrt(self.hd))
        self.options["align"] = self.options.pop("causal_align", "bottom_right")
        if "mask" in self.options:
            kind = self.options.pop("mask")
            self.options["mask_kind"] = self.options.pop("mask_polarity", kind)

    def heads(self, x, n):
        b, t, _ = x.shape
        return x.view(b, t, n, self.hd).transpose(1, 2)

    def forward(self, x, memory=None, mask=None):
        src = x if memory is None else memory
        q = self.heads(self.q_proj(x), self.h)
        k = self.heads(self.k_proj(src), self.hkv)
        v = self.heads(self.v_proj(src), self.hkv)
        if self.rope:
            style, base, dim = self.rope
            q = rotate(q, torch.arange(q.shape[2]), style, base, dim)
            k = rotate(k, torch.arange(k.shape[2]), style, base, dim)
        out, w = attend(q, k, v, slopes=self.slopes, mask=mask, **self.options)
        b, _, t, _ = out.shape
        out = out.transpose(1, 2).reshape(b, t, self.h * self.hd)
        return getattr(self, self.out_name)(out), w


class RMSNorm(nn.Module):
    """Hugging Face's LlamaRMSNorm: weight · x / sqrt(mean(x²) + eps)."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


ACTIVATIONS = {
    "gelu": nn.GELU(),
    "gelu_tanh": nn.GELU(approximate="tanh"),
    "silu": nn.SiLU(),
    "relu": nn.ReLU(),
}


class MLP(nn.Module):
    """nn.mlp: fc2(act(fc1(x))), or Llama's down(act(gate(x)) * up(x))."""

    def __init__(self, d, d_hidden, gated=False, activation="gelu", bias=True):
        super().__init__()
        self.gated, self.act = gated, ACTIVATIONS[activation]
        if gated:
            self.gate_proj = nn.Linear(d, d_hidden, bias=bias)
            self.up_proj = nn.Linear(d, d_hidden, bias=bias)
            self.down_proj = nn.Linear(d_hidden, d, bias=bias)
        else:
            self.fc1 = nn.Linear(d, d_hidden, bias=bias)
            self.fc2 = nn.Linear(d_hidden, d, bias=bias)

    def forward(self, x):
        if self.gated:
            return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))
        return self.fc2(self.act(self.fc1(x)))


def sinusoidal(t, d, base=10000.0):
    """The Vaswani encoding of positions 0..t-1, computed in float64."""
    pos = torch.arange(t, dtype=torch.float64)[:, None]
    j = torch.arange(0, d, 2, dtype=torch.float64)
    angle = pos / base ** (j / d)
    pe = torch.zeros(t, d, dtype=torch.float64)
    pe[:, 0::2] = angle.sin()
    pe[:, 1::2] = angle.cos()[:, : d // 2]
    return pe.float()


# ------------------------------------------------------------------ cases

def randomize(module, std=0.5):
    """Draws every parameter from N(0, std²) so that no weight is a trivial 0 or 1."""
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, std)
    return module


def state(module):
    return {name: value.tolist() for name, value in module.state_dict().items()}


def listed(t):
    """A tensor as nested lists for JSON, which has no NaN or infinity: NaN
    becomes null and ±Inf the strings "inf" and "-inf"."""
    a = t.detach().numpy().astype(object)
    a[np.isnan(t.detach().numpy())] = None
    a[np.isposinf(t.detach().numpy())] = "inf"
    a[np.isneginf(t.detach().numpy())] = "-inf"
    return a.tolist()


def case(type_, config, module, inputs, output, weights=None, float64=None):
    """A case: the layer's type and config, PyTorch's state dict, inputs and
    float32 output, and where given the attention weights and the output of
    a float64 copy of the module (for the float64 rule of
    docs/crosscheck.md, where the float32 computation cancels)."""
    c = {"type": type_, "config": config, "params": state(module) if module is not None else {},
         "inputs": [listed(x) for x in inputs], "output": listed(output)}
    if weights is not None:
        c["weights"] = listed(weights)
    if float64 is not None:
        c["float64"] = listed(float64.float())
    return c


def exact(module, *inputs):
    """module's output computed in float64 by a copy of it, on the inputs."""
    with torch.no_grad():
        return copy.deepcopy(module).double()(*(x.double() for x in inputs))


def sdpa_case(config, x, memory=None, mask=None, unbatched=False):
    """Builds attention.sdpa with config, runs it, returns the case."""
    module = randomize(SDPAttention(**config))
    with torch.no_grad():
        xb = x.unsqueeze(0) if unbatched else x
        mb = memory.unsqueeze(0) if (unbatched and memory is not None) else memory
        out, w = module(xb, mb, mask)
        if unbatched:
            out = out.squeeze(0)
    inputs = [x] + ([memory] if memory is not None else []) + ([mask] if mask is not None else [])
    return case("attention.sdpa", config, module, inputs, out, w)


def bool_mask(shape, p_keep, generator_seed):
    g = torch.Generator().manual_seed(generator_seed + SEED_OFFSET)
    return (torch.rand(shape, generator=g) < p_keep).float()


def sdpa_cases():
    cases = {}
    seed(10)
    x = torch.randn(2, 5, 8)
    cases["sdpa_plain"] = sdpa_case(dict(d=8, num_heads=2, qkv_bias=True), x)
    seed(11)
    x = torch.randn(2, 6, 8)
    cases["sdpa_causal_gqa"] = sdpa_case(dict(d=8, num_heads=4, num_kv_heads=2, causal=True), x)
    seed(12)
    x = torch.randn(5, 8)
    cases["sdpa_mqa_unbatched"] = sdpa_case(
        dict(d=8, num_heads=4, num_kv_heads=1, head_dim=3, causal=True), x, unbatched=True)

    seed(13)
    x = torch.randn(2, 5, 8)
    keep = bool_mask((2, 1, 5, 5), 0.6, 1)
    keep[1, 0, 2] = 0  # a query that sees nothing: zeros
    cases["sdpa_keep_mask"] = sdpa_case(
        dict(d=8, num_heads=2, mask="bool", mask_polarity="keep"), x, mask=keep)
    seed(14)
    x = torch.randn(2, 5, 8)
    drop = bool_mask((5, 5), 0.4, 2)
    drop[3] = 1  # a query whose keys are all masked out: NaN
    cases["sdpa_drop_mask_nan"] = sdpa_case(
        dict(d=8, num_heads=2, mask="bool", mask_polarity="mask", masked_rows="nan"), x, mask=drop)
    seed(15)
    x = torch.randn(2, 5, 8)
    additive = torch.randn(2, 2, 5, 5)
    additive[0, 1, 4, 1] = NEG_INF
    cases["sdpa_additive_mask"] = sdpa_case(
        dict(d=8, num_heads=2, mask="additive", causal=True), x, mask=additive)

    seed(16)
    x, memory = torch.randn(2, 4, 8), torch.randn(2, 7, 6)
    for align in ("bottom_right", "top_left"):
        cases[f"sdpa_cross_{align}"] = sdpa_case(
            dict(d=8, d_memory=6, num_heads=2, causal=True, causal_align=align, qkv_bias=True), x, memory)
    seed(17)
    x, memory = torch.randn(2, 6, 8), torch.randn(2, 3, 8)
    cases["sdpa_cross_more_queries"] = sdpa_case(dict(d=8, num_heads=2, causal=True), x, memory)
    seed(18)
    x, memory = torch.randn(2, 4, 8), torch.randn(2, 6, 8)
    padding = torch.zeros(2, 1, 1, 6)
    padding[0, 0, 0, 4:] = 1
    cases["sdpa_cross_key_padding"] = sdpa_case(
        dict(d=8, num_heads=2, mask="bool", mask_polarity="mask"), x, memory, mask=padding)

    seed(19)
    x = torch.randn(2, 6, 8)
    cases["sdpa_softcap"] = sdpa_case(dict(d=8, num_heads=2, causal=True, softcap=1.5, scale=0.9), x)
    seed(20)
    x = torch.randn(2, 7, 8)
    cases["sdpa_window"] = sdpa_case(dict(d=8, num_heads=2, causal=True, window=3), x)
    seed(20)
    x = torch.randn(2, 7, 8)
    cases["sdpa_window_centred"] = sdpa_case(dict(d=8, num_heads=2, window=5, rope="half"), x)
    seed(21)
    x = torch.randn(2, 6, 8)
    cases["sdpa_rope_half"] = sdpa_case(dict(d=8, num_heads=2, causal=True, rope="half"), x)
    seed(22)
    x = torch.randn(2, 6, 8)
    cases["sdpa_rope_interleaved_partial"] = sdpa_case(
        dict(d=8, num_heads=2, causal=True, rope="interleaved", rope_base=500.0, rope_rotary_dim=2), x)
    seed(23)
    x = torch.randn(2, 6, 9)
    cases["sdpa_alibi"] = sdpa_case(dict(d=9, num_heads=3, causal=True, alibi=True), x)
    seed(24)
    x = torch.randn(2, 7, 8)
    padding = torch.ones(2, 1, 1, 7)
    padding[1, 0, 0, :2] = 0  # left padding of sequence 1
    cases["sdpa_everything"] = sdpa_case(
        dict(d=8, num_heads=4, num_kv_heads=2, causal=True, window=4, softcap=2.0, rope="half",
             rope_rotary_dim=2, mask="bool", mask_polarity="keep", out_bias=False, out_name="o_proj"),
        x, mask=padding)
    return cases


def mha_case(config, inputs, masks, forward_kwargs):
    """nn.MultiheadAttention with config; inputs are query[, key, value]."""
    module = randomize(nn.MultiheadAttention(**{k: v for k, v in config.items()
                                                if k not in ("key_padding_mask", "attn_mask", "average_attn_weights")}))
    query = inputs[0]
    key = inputs[1] if len(inputs) > 1 else query
    value = inputs[2] if len(inputs) > 2 else key
    torch_masks = {}
    for name, m in masks.items():
        torch_masks[name] = m.bool() if config[name] == "bool" else m
    with torch.no_grad():
        out, w = module(query, key, value, need_weights=True, **torch_masks, **forward_kwargs)
    average = forward_kwargs.get("average_attn_weights", True)
    if query.dim() == 2:  # unbatched: (L, S) or (H, L, S)
        w = w.unsqueeze(0)
    if average:
        w = w.unsqueeze(1)
    config = dict(config)
    if not average:
        config["average_attn_weights"] = False
    ordered = [m for n, m in (("key_padding_mask", masks.get("key_padding_mask")),
                              ("attn_mask", masks.get("attn_mask"))) if m is not None]
    return case("attention.torch_mha", config, module, list(inputs) + ordered, out, w)


def mha_cases():
    cases = {}
    seed(30)
    x = torch.randn(2, 5, 8)
    cases["mha_self_batch_first"] = mha_case(dict(embed_dim=8, num_heads=2, batch_first=True), [x], {}, {})

    seed(31)
    q, memory = torch.randn(4, 2, 8), torch.randn(6, 2, 8)  # (L, B, E): batch_first False
    kpm = torch.zeros(2, 6)
    kpm[1, 4:] = 1
    attn = torch.randn(4, 6)
    cases["mha_seq_first_masks"] = mha_case(
        dict(embed_dim=8, num_heads=2, key_padding_mask="bool", attn_mask="float"), [q, memory],
        {"key_padding_mask": kpm, "attn_mask": attn}, {"average_attn_weights": False})

    seed(32)
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 3)
    kpm = torch.zeros(2, 5)
    kpm[0, 0] = 1
    attn = bool_mask((2 * 2, 4, 5), 0.3, 3)
    cases["mha_kdim_vdim_extras"] = mha_case(
        dict(embed_dim=8, num_heads=2, kdim=6, vdim=3, add_bias_kv=True, add_zero_attn=True,
             batch_first=True, key_padding_mask="bool", attn_mask="bool"),
        [q, k, v], {"key_padding_mask": kpm, "attn_mask": attn}, {})

    seed(33)
    q, memory = torch.randn(4, 6), torch.randn(5, 6)
    kpm = torch.tensor([0.0, 1.0, 0.0, 0.0, 1.0])
    cases["mha_unbatched"] = mha_case(
        dict(embed_dim=6, num_heads=3, bias=False, add_zero_attn=True, key_padding_mask="bool"),
        [q, memory], {"key_padding_mask": kpm}, {"average_attn_weights": False})

    seed(34)
    x = torch.randn(2, 4, 8)
    kpm = torch.zeros(2, 4)
    kpm[1] = 1  # every key of sequence 1 masked: NaN, as PyTorch
    cases["mha_nan_rows"] = mha_case(
        dict(embed_dim=8, num_heads=2, batch_first=True, key_padding_mask="bool"), [x], {"key_padding_mask": kpm}, {})

    seed(35)
    x = torch.randn(2, 5, 8)
    kpm = torch.randn(2, 5)
    cases["mha_float_key_padding"] = mha_case(
        dict(embed_dim=8, num_heads=4, batch_first=True, key_padding_mask="float"), [x], {"key_padding_mask": kpm}, {})

    seed(36)
    x = torch.randn(2, 6, 8)
    causal = torch.triu(torch.ones(6, 6), diagonal=1)
    cases["mha_causal_bias_kv"] = mha_case(
        dict(embed_dim=8, num_heads=2, batch_first=True, add_bias_kv=True, attn_mask="bool"), [x], {"attn_mask": causal}, {})
    return cases


def position_cases():
    cases = {}
    seed(40)
    x = torch.randn(2, 7, 6)
    cases["sinusoidal"] = case("position.sinusoidal", dict(d=6), None, [x], x + sinusoidal(7, 6))
    x = torch.randn(9, 5)
    cases["sinusoidal_odd_base"] = case("position.sinusoidal", dict(d=5, base=100.0), None, [x], x + sinusoidal(9, 5, 100.0))

    seed(41)
    x = torch.randn(2, 5, 8)
    heads = x.view(2, 5, 2, 4).transpose(1, 2)
    out = rotate(heads, torch.arange(5), "half", 10000.0, 0).transpose(1, 2).reshape(2, 5, 8)
    cases["rope_half"] = case("position.rope", dict(head_dim=4), None, [x], out)
    x = torch.randn(2, 5, 12)
    heads = x.view(2, 5, 2, 6).transpose(1, 2)
    out = rotate(heads, torch.arange(5), "interleaved", 1000.0, 4).transpose(1, 2).reshape(2, 5, 12)
    cases["rope_interleaved_partial"] = case(
        "position.rope", dict(head_dim=6, style="interleaved", base=1000.0, rotary_dim=4), None, [x], out)

    for n, causal in ((6, False), (8, True)):
        x = torch.randn(1, 5, 4)
        pos = torch.arange(5)
        bias = alibi_slopes(n)[:, None, None] * (pos[None, :] - pos[:, None]).float()[None]
        if causal:
            bias = bias.masked_fill(pos[None, :] > pos[:, None], NEG_INF)
        cases[f"alibi_{n}" + ("_causal" if causal else "")] = case(
            "position.alibi", dict(num_heads=n, causal=causal), None, [x], bias)
    return cases


def block_piece_cases():
    cases = {}
    seed(50)
    x = torch.randn(2, 5, 8) * 2 + 0.5
    m = randomize(nn.LayerNorm(8))
    cases["layer_norm"] = case("norm.layer", dict(d=8), m, [x], m(x), float64=exact(m, x))
    m = nn.LayerNorm(8, eps=1e-3, elementwise_affine=False)
    cases["layer_norm_plain"] = case("norm.layer", dict(d=8, eps=1e-3, elementwise_affine=False), m, [x], m(x),
                                     float64=exact(m, x))
    m = randomize(RMSNorm(8))
    cases["rms_norm"] = case("norm.rms", dict(d=8), m, [x], m(x), float64=exact(m, x))
    m = randomize(RMSNorm(8, eps=1e-2))
    cases["rms_norm_eps"] = case("norm.rms", dict(d=8, eps=1e-2), m, [x[0]], m(x[0]), float64=exact(m, x[0]))

    x = torch.linspace(-6, 6, 2 * 5 * 8).view(2, 5, 8)
    cases["gelu"] = case("activation.gelu", {}, None, [x], F.gelu(x), float64=F.gelu(x.double()))
    cases["gelu_tanh"] = case("activation.gelu", dict(approximate="tanh"), None, [x], F.gelu(x, approximate="tanh"),
                              float64=F.gelu(x.double(), approximate="tanh"))

    seed(51)
    x = torch.randn(2, 5, 6)
    for name, config in (("mlp_fc_gelu", dict(d=6, d_hidden=10)),
                         ("mlp_fc_relu_nobias", dict(d=6, d_hidden=7, activation="relu", bias=False)),
                         ("mlp_gated_silu", dict(d=6, d_hidden=10, gated=True, activation="silu", bias=False)),
                         ("mlp_gated_gelu_tanh", dict(d=6, d_hidden=4, gated=True, activation="gelu_tanh"))):
        m = randomize(MLP(**config))
        with torch.no_grad():
            cases[name] = case("nn.mlp", config, m, [x], m(x), float64=exact(m, x))
    return cases


# ----------------------------------------------------------------- blocks

class GPT2Block(nn.Module):
    """A GPT-2-style model: learned positions, one pre-norm block, final norm.

    h = x + wpe; h = h + attn(ln_1(h)); h = h + mlp(ln_2(h)); ln_f(h), with
    causal attention with biases and the tanh GELU, as GPT-2 has them.
    """

    def __init__(self, d=16, heads=4, context=12):
        super().__init__()
        self.wpe = nn.Embedding(context, d)
        self.ln_1 = nn.LayerNorm(d)
        self.attn = SDPAttention(d, heads, qkv_bias=True, causal=True)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLP(d, 4 * d, activation="gelu_tanh")
        self.ln_f = nn.LayerNorm(d)

    def forward(self, x):
        h = x + self.wpe.weight[: x.shape[-2]]
        h = h + self.attn(self.ln_1(h))[0]
        h = h + self.mlp(self.ln_2(h))
        return self.ln_f(h)


class LlamaBlock(nn.Module):
    """A Llama decoder layer (Hugging Face's LlamaDecoderLayer): RMSNorm,
    grouped-query attention with RoPE and no biases, SwiGLU MLP."""

    def __init__(self, d=16, heads=4, kv_heads=2, hidden=40):
        super().__init__()
        self.input_layernorm = RMSNorm(d)
        self.self_attn = SDPAttention(d, heads, num_kv_heads=kv_heads, causal=True, rope="half",
                                      out_bias=False, out_name="o_proj")
        self.post_attention_layernorm = RMSNorm(d)
        self.mlp = MLP(d, hidden, gated=True, activation="silu", bias=False)

    def forward(self, x):
        h = x + self.self_attn(self.input_layernorm(x))[0]
        return h + self.mlp(self.post_attention_layernorm(h))


class DecoderBlock(nn.Module):
    """A post-norm transformer decoder layer (as nn.TransformerDecoderLayer):
    causal self-attention with sinusoidal positions, cross-attention over a
    padded memory through nn.MultiheadAttention, ReLU MLP."""

    def __init__(self, d=12, heads=3, d_memory=10):
        super().__init__()
        self.self_attn = SDPAttention(d, heads, causal=True, qkv_bias=True)
        self.norm1 = nn.LayerNorm(d)
        self.cross_attn = nn.MultiheadAttention(d, heads, kdim=d_memory, vdim=d_memory, batch_first=True)
        self.norm2 = nn.LayerNorm(d)
        self.mlp = MLP(d, 2 * d, activation="relu")
        self.norm3 = nn.LayerNorm(d)

    def forward(self, x, memory, memory_padding):
        h = x + sinusoidal(x.shape[-2], x.shape[-1])
        h = self.norm1(h + self.self_attn(h)[0])
        h = self.norm2(h + self.cross_attn(h, memory, memory, key_padding_mask=memory_padding.bool(),
                                           need_weights=False)[0])
        return self.norm3(h + self.mlp(h))


def npy_bytes(t):
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(t.detach().numpy().astype(np.float32)))
    return buf.getvalue()


def write_npz(path, arrays):
    """Writes an .npz as numpy.savez does, with fixed timestamps (byte-stable)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, t in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, npy_bytes(t))


def write_block(name, module, inputs, out=None):
    """Writes a block's weights, inputs and PyTorch output next to its
    committed model.yaml, or under OUT/blocks/<name>/ with a copy of it."""
    config = os.path.join(ROOT, "models", "testdata", "blocks", name, "model.yaml")
    if not os.path.isfile(config):
        raise SystemExit(f"{config} is missing: the block's attnrun config")
    folder = os.path.dirname(config)
    if out is not None:
        folder = os.path.join(out, "blocks", name)
        os.makedirs(folder, exist_ok=True)
        shutil.copyfile(config, os.path.join(folder, "model.yaml"))
    with torch.no_grad():
        y = module(*inputs)
    write_npz(os.path.join(folder, "weights.npz"), module.state_dict())
    for k, x in enumerate(inputs):
        with open(os.path.join(folder, f"input_{k}.npy"), "wb") as f:
            f.write(npy_bytes(x))
    with open(os.path.join(folder, "expected.npy"), "wb") as f:
        f.write(npy_bytes(y))
    print(f"block {name}: output {tuple(y.shape)}, {len(module.state_dict())} tensors")


def blocks(out=None):
    seed(60)
    write_block("gpt2", randomize(GPT2Block(), 0.3), [torch.randn(2, 9, 16)], out)
    seed(61)
    write_block("llama", randomize(LlamaBlock(), 0.3), [torch.randn(2, 9, 16)], out)
    seed(62)
    memory_padding = torch.zeros(2, 7)
    memory_padding[1, 5:] = 1
    write_block("decoder", randomize(DecoderBlock(), 0.3),
                [torch.randn(2, 6, 12), torch.randn(2, 7, 10), memory_padding], out)


def main():
    global SEED_OFFSET
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, help="draw fresh references: shift every case's seed by 100·SEED")
    parser.add_argument("--out", help="write modern_cases.json and blocks/ under OUT instead of the committed files")
    args = parser.parse_args()
    if (args.seed is None) != (args.out is None):
        parser.error("--seed and --out go together")
    if args.seed is not None:
        SEED_OFFSET = 100 * args.seed
        os.makedirs(args.out, exist_ok=True)
    torch.set_grad_enabled(False)
    cases = {}
    for make in (sdpa_cases, mha_cases, position_cases, block_piece_cases):
        cases.update(make())
    path = os.path.join(ROOT, "layers", "testdata", "modern_cases.json")
    if args.out is not None:
        path = os.path.join(args.out, "modern_cases.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cases, f, indent=None, separators=(",", ":"), allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)
    print(f"{len(cases)} cases -> {path if args.out else os.path.relpath(path, ROOT)}")
    blocks(args.out)


if __name__ == "__main__":
    main()
