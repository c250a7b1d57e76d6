"""PyTorch references for attention.sdpa's qk_norm, sinks and score_mod.

Runs with the reference virtualenv (torch 2.15, transformers 5.23), not
Debian's PyTorch 1.13, which has neither flex_attention nor these models:

    ~/.cache/attnrun/venv/bin/python testdata/torch/sdpa_frontier.py

Writes layers/testdata/sdpa_frontier_cases.json in the format of
modern_cases.json (see modern.py): type, config, params (the module's
state_dict), inputs, output, weights. Deterministic: re-running leaves git
clean.

The references are Hugging Face's own modeling code, built from config
classes with seeded weights (no hub):
  - qk_norm: transformers' Qwen3Attention (q_norm and k_norm are
    Qwen3RMSNorm over head_dim, after the projections, before RoPE), on the
    position embeddings of Qwen3RotaryEmbedding and an additive causal (and
    sliding-window) mask, eager attention;
  - qk_norm: rms_projection: transformers' Olmo2Attention (q_norm and
    k_norm are Olmo2RMSNorm over the whole q and k projections, before the
    head split and RoPE), on Olmo2RotaryEmbedding's position embeddings;
  - sinks: transformers' GptOssAttention and its eager_attention_forward
    (the sinks are one more softmax column, dropped), on
    GptOssRotaryEmbedding with the default rope (gpt-oss ships YaRN, which
    attnrun's rope does not do);
  - both at once (the issue's acceptance config, with no rope): Qwen3RMSNorm
    and gpt-oss's eager_attention_forward around nn.Linear projections.
  - score_mod: torch.nn.attention.flex_attention.flex_attention, which runs
    on the CPU in eager mode (it warns that it is not compiled), with the
    score_mod functions of PyTorch's documentation; the causal frontier
    is part of the score_mod (−Inf), as attention.sdpa hides keys after
    its modifications. Each case also computes the same attention written
    out (the score_mod applied to the whole score tensor at once), asserts
    that it equals flex_attention's output, and stores its weights for
    attnrun's weights hook (flex_attention returns none).
"""

import json
import math
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
from torch.nn.attention.flex_attention import flex_attention
from transformers import GptOssConfig, Olmo2Config, Qwen3Config
from transformers.models.gpt_oss import modeling_gpt_oss as gpt_oss
from transformers.models.olmo2 import modeling_olmo2 as olmo2
from transformers.models.qwen3 import modeling_qwen3 as qwen3

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from modern import alibi_slopes, listed  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NEG_INF = float("-inf")

warnings.filterwarnings("ignore", message=".*flex_attention.*")


def seed(k):
    torch.manual_seed(1400 + k)


def randomize(module, std=0.25):
    """Every parameter from N(0, std²), about 1.4/√d for d = 32, so that the
    outputs are O(1) and 1e-6 is a fair absolute tolerance; norm weights
    around 1."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.3 * torch.randn_like(p))
            elif name == "sinks":
                p.normal_(0, 1)  # comparable to the scores, so that they matter
            else:
                p.normal_(0, std)
    return module


def state(module):
    return {name: value.tolist() for name, value in module.state_dict().items()}


def case(config, module, inputs, output, weights=None):
    c = {"type": "attention.sdpa", "config": config, "params": state(module),
         "inputs": [listed(x) for x in inputs], "output": listed(output)}
    if weights is not None:
        c["weights"] = listed(weights)
    return c


def additive_mask(t, window=0, keep=None):
    """The (B or 1, 1, T, T) additive mask of causal attention: 0 where a
    query sees a key, −Inf elsewhere; window > 0 keeps the last window keys
    (itself included); keep (B, 1, 1, T), if given, hides keys where 0."""
    q, k = torch.arange(t)[:, None], torch.arange(t)[None, :]
    hidden = k > q
    if window:
        hidden = hidden | (q - k >= window)
    hidden = hidden[None, None]
    if keep is not None:
        hidden = hidden | (keep == 0)
    return torch.zeros(hidden.shape).masked_fill(hidden, NEG_INF)


# ------------------------------------------------------------- qk_norm: Qwen3

def qwen3_case(x, *, eps=1e-6, bias=False, window=0):
    config = Qwen3Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                         rms_norm_eps=eps, attention_bias=bias)
    config._attn_implementation = "eager"
    module = randomize(qwen3.Qwen3Attention(config, layer_idx=0)).eval()
    rotary = qwen3.Qwen3RotaryEmbedding(config)
    b, t, _ = x.shape
    pos = torch.arange(t)[None].expand(b, t)
    cos, sin = rotary(x, pos)
    with torch.no_grad():
        out, w = module(x, (cos, sin), additive_mask(t, window))
    cfg = dict(d=32, num_heads=4, num_kv_heads=2, causal=True, rope="half",
               rope_base=config.rope_parameters["rope_theta"], qk_norm="rms",
               qkv_bias=bias, out_bias=bias, out_name="o_proj")
    if eps != 1e-6:
        cfg["qk_norm_eps"] = eps
    if window:
        cfg["window"] = window
    return case(cfg, module, [x], out, w)


# ---------------------------------------------- qk_norm: rms_projection: OLMo-2

def olmo2_case(x, *, eps=1e-6):
    config = Olmo2Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=eps)
    config._attn_implementation = "eager"
    module = randomize(olmo2.Olmo2Attention(config, layer_idx=0)).eval()
    rotary = olmo2.Olmo2RotaryEmbedding(config)
    b, t, _ = x.shape
    pos = torch.arange(t)[None].expand(b, t)
    cos, sin = rotary(x, pos)
    with torch.no_grad():
        out, w = module(x, (cos, sin), additive_mask(t))
    cfg = dict(d=32, num_heads=4, num_kv_heads=2, causal=True, rope="half",
               rope_base=config.rope_parameters["rope_theta"], qk_norm="rms_projection",
               qkv_bias=False, out_bias=False, out_name="o_proj")
    if eps != 1e-6:
        cfg["qk_norm_eps"] = eps
    return case(cfg, module, [x], out, w)


# ---------------------------------------------------------------- sinks: gpt-oss

def gpt_oss_case(x, *, window=0, keep=None):
    config = GptOssConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                          attention_bias=True, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                          layer_types=["sliding_attention" if window else "full_attention"],
                          sliding_window=window or None, num_hidden_layers=1)
    config._attn_implementation = "eager"
    module = randomize(gpt_oss.GptOssAttention(config, layer_idx=0)).eval()
    rotary = gpt_oss.GptOssRotaryEmbedding(config)
    b, t, _ = x.shape
    pos = torch.arange(t)[None].expand(b, t)
    cos, sin = rotary(x, pos)
    with torch.no_grad():
        out, w = module(x, (cos, sin), additive_mask(t, window, keep))
    cfg = dict(d=32, num_heads=4, num_kv_heads=2, causal=True, rope="half", sinks=True,
               qkv_bias=True, out_name="o_proj")
    inputs = [x]
    if window:
        cfg["window"] = window
    if keep is not None:
        cfg.update(mask="bool", mask_polarity="keep")
        inputs.append(keep)
    return case(cfg, module, inputs, out, w)


class NormSinkAttention(nn.Module):
    """attention.sdpa with qk_norm: rms and sinks and no rope: Qwen3's
    q_norm and k_norm (Qwen3RMSNorm) and gpt-oss's eager attention with
    sinks, between projections named as attnrun's defaults (out_proj)."""

    def __init__(self, d, heads, kv_heads, d_memory=None, eps=1e-6):
        super().__init__()
        self.head_dim = d // heads
        self.num_key_value_groups = heads // kv_heads
        self.q_proj = nn.Linear(d, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d_memory or d, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d_memory or d, kv_heads * self.head_dim, bias=False)
        self.out_proj = nn.Linear(heads * self.head_dim, d, bias=True)
        self.q_norm = qwen3.Qwen3RMSNorm(self.head_dim, eps=eps)
        self.k_norm = qwen3.Qwen3RMSNorm(self.head_dim, eps=eps)
        self.sinks = nn.Parameter(torch.empty(heads))
        self.training = False

    def forward(self, x, memory=None, mask=None):
        src = x if memory is None else memory
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, t, -1, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(src).view(b, src.shape[1], -1, self.head_dim)).transpose(1, 2)
        v = self.v_proj(src).view(b, src.shape[1], -1, self.head_dim).transpose(1, 2)
        out, w = gpt_oss.eager_attention_forward(self, q, k, v, mask, scaling=self.head_dim ** -0.5)
        return self.out_proj(out.reshape(b, t, -1)), w


def norm_sink_case(x, memory=None, mask=None, extra=None):
    module = randomize(NormSinkAttention(32, 4, 2, d_memory=None if memory is None else memory.shape[-1]))
    with torch.no_grad():
        out, w = module(x, memory, mask)
    cfg = dict(d=32, num_heads=4, num_kv_heads=2, qk_norm="rms", sinks=True)
    cfg.update(extra or {})
    return module, out, w, cfg


# ------------------------------------------------------------ score_mod: flex

def softcap(cap):
    return lambda s, b, h, q, k: cap * torch.tanh(s / cap)


def alibi(heads):
    slopes = alibi_slopes(heads)
    return lambda s, b, h, q, k: s + slopes[h] * (k - q)


def relative_bias(table, n):
    return lambda s, b, h, q, k: s + table[h, torch.clamp(k - q, 1 - n, n - 1) + n - 1]


def document_mask(lengths):
    ids = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
    last = len(ids) - 1
    return lambda s, b, h, q, k: torch.where(ids[torch.clamp(q, max=last)] == ids[torch.clamp(k, max=last)], s, NEG_INF)


def custom(s, b, h, q, k):
    """The custom modification registered by layers' tests (test.wave):
    s + 0.25·(b+1)·(h+1)·cos(q − k)."""
    return s + 0.25 * (b + 1) * (h + 1) * torch.cos((q - k).to(s.dtype))


def chain(*mods):
    def mod(s, b, h, q, k):
        for m in mods:
            s = m(s, b, h, q, k)
        return s
    return mod


class FlexSDPA(nn.Module):
    """attention.sdpa's projections around flex_attention."""

    def __init__(self, d, heads, kv_heads, d_memory=None, qkv_bias=False):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, d, bias=qkv_bias)
        self.k_proj = nn.Linear(d_memory or d, kv_heads * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(d_memory or d, kv_heads * self.head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d, d)

    def forward(self, x, memory, mod, causal, align):
        src = x if memory is None else memory
        b, t, _ = x.shape
        s_len = src.shape[1]
        q = self.q_proj(x).view(b, t, self.heads, -1).transpose(1, 2)
        k = self.k_proj(src).view(b, s_len, self.kv_heads, -1).transpose(1, 2)
        v = self.v_proj(src).view(b, s_len, self.kv_heads, -1).transpose(1, 2)
        offset = s_len - t if align == "bottom_right" else 0

        def full(s, bi, h, qi, ki):
            s = mod(s, bi, h, qi, ki)
            return torch.where(ki <= qi + offset, s, NEG_INF) if causal else s

        out = flex_attention(q, k, v, score_mod=full, enable_gqa=True)
        # The same attention written out, for the weights.
        group = self.heads // self.kv_heads
        scores = q @ k.repeat_interleave(group, 1).transpose(-2, -1) / math.sqrt(self.head_dim)
        idx = [torch.arange(n).view([-1 if i == a else 1 for i in range(4)]) for a, n in enumerate(scores.shape)]
        scores = full(scores, *idx)
        w = torch.softmax(scores, -1)
        w = torch.where(torch.isinf(scores).all(-1, keepdim=True) & (scores < 0).all(-1, keepdim=True), 0.0, w)
        eager = w @ v.repeat_interleave(group, 1)
        torch.testing.assert_close(eager, out, rtol=1e-5, atol=1e-6)
        return self.out_proj(out.transpose(1, 2).reshape(b, t, -1)), w


def flex_case(config, mod, x, memory=None, causal=True, align="bottom_right", params=None):
    module = randomize(FlexSDPA(config["d"], config["num_heads"], config.get("num_kv_heads", config["num_heads"]),
                                config.get("d_memory"), config.get("qkv_bias", False)))
    with torch.no_grad():
        out, w = module(x, memory, mod, causal, align)
    cfg = dict(config, causal=causal)
    if causal and align != "bottom_right":
        cfg["causal_align"] = align
    c = case(cfg, module, [x] + ([memory] if memory is not None else []), out, w)
    for name, value in (params or {}).items():
        c["params"][name] = value.tolist()
    return c


def score_mod_cases():
    cases = {}
    seed(20)
    x = torch.randn(2, 6, 16)
    cases["score_softcap"] = flex_case(dict(d=16, num_heads=2, score_mod={"type": "softcap", "cap": 1.5}),
                                       softcap(1.5), x)
    seed(21)
    x = torch.randn(2, 7, 16)
    cases["score_alibi_gqa"] = flex_case(dict(d=16, num_heads=4, num_kv_heads=2, score_mod={"type": "alibi"}),
                                         alibi(4), x)
    seed(22)
    x = torch.randn(2, 6, 16)
    table = torch.randn(2, 2 * 3 - 1)
    cases["score_relative_bias"] = flex_case(
        dict(d=16, num_heads=2, score_mod={"type": "relative_bias", "max_distance": 3}),
        relative_bias(table, 3), x, causal=False, params={"score_mod.bias": table})
    seed(23)
    x = torch.randn(2, 9, 16)
    # 9 tokens, documents of 2, 3 and 2: the last two tokens continue the
    # last document.
    cases["score_document_mask"] = flex_case(
        dict(d=16, num_heads=2, score_mod={"type": "document_mask", "lengths": [2, 3, 2]}),
        document_mask([2, 3, 2]), x)
    seed(24)
    x = torch.randn(2, 7, 16)
    table = torch.randn(4, 2 * 2 - 1)
    cases["score_list"] = flex_case(
        dict(d=16, num_heads=4, num_kv_heads=1, qkv_bias=True,
             score_mod=[{"type": "softcap", "cap": 2.0}, {"type": "alibi"},
                        {"type": "relative_bias", "max_distance": 2}, {"type": "document_mask", "lengths": [3, 4]}]),
        chain(softcap(2.0), alibi(4), relative_bias(table, 2), document_mask([3, 4])), x,
        params={"score_mod.2.bias": table})
    seed(25)
    x = torch.randn(2, 6, 16)
    cases["score_custom"] = flex_case(dict(d=16, num_heads=2, score_mod={"type": "test.wave"}), custom, x)
    # Cross-attention, bottom-right: the modifications see query index i,
    # the causal frontier position i + S − T.
    seed(26)
    x, memory = torch.randn(2, 4, 16), torch.randn(2, 6, 12)
    table = torch.randn(2, 2 * 4 - 1)
    cases["score_cross_bottom_right"] = flex_case(
        dict(d=16, d_memory=12, num_heads=2, score_mod={"type": "relative_bias", "max_distance": 4}),
        relative_bias(table, 4), x, memory, params={"score_mod.bias": table})
    # Queries 2 and 3 are of document 2, which has no key among the
    # memory's two: rows of weights 0.
    seed(27)
    x, memory = torch.randn(2, 4, 16), torch.randn(2, 2, 16)
    cases["score_cross_empty_row"] = flex_case(
        dict(d=16, num_heads=2, score_mod=[{"type": "document_mask", "lengths": [1, 1, 2]}]),
        document_mask([1, 1, 2]), x, memory, causal=False)
    return cases


def sdpa_frontier_cases():
    cases = {}
    seed(1)
    cases["qwen3_qk_norm"] = qwen3_case(torch.randn(2, 6, 32))
    seed(2)
    cases["qwen3_qk_norm_bias_eps_window"] = qwen3_case(torch.randn(2, 7, 32), eps=1e-3, bias=True, window=3)
    seed(3)
    cases["gpt_oss_sinks"] = gpt_oss_case(torch.randn(2, 6, 32))
    seed(4)
    keep = torch.ones(2, 1, 1, 7)
    keep[1, 0, 0, :2] = 0  # left padding: query 0 of sequence 1 sees no key, the sink takes its weight
    cases["gpt_oss_sinks_window_padding"] = gpt_oss_case(torch.randn(2, 7, 32), window=4, keep=keep)

    seed(5)
    x = torch.randn(2, 6, 32)
    module, out, w, cfg = norm_sink_case(x, mask=additive_mask(6), extra=dict(causal=True))
    cases["qk_norm_sinks"] = case(cfg, module, [x], out, w)
    seed(6)
    x, memory = torch.randn(2, 4, 32), torch.randn(2, 5, 24)
    module, out, w, cfg = norm_sink_case(x, memory, extra=dict(d_memory=24))
    cases["qk_norm_sinks_cross"] = case(cfg, module, [x, memory], out, w)
    cases.update(score_mod_cases())
    seed(7)
    cases["olmo2_qk_norm_projection"] = olmo2_case(torch.randn(2, 6, 32), eps=1e-5)
    return cases


def main():
    torch.set_grad_enabled(False)
    cases = sdpa_frontier_cases()
    path = os.path.join(ROOT, "layers", "testdata", "sdpa_frontier_cases.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cases, f, indent=None, separators=(",", ":"), allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)
    print(f"{len(cases)} cases -> {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
