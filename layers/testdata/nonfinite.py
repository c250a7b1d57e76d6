"""Writes nonfinite_cases.json: PyTorch's outputs and attention weights when
a layer's inputs hold NaN, +Inf or -Inf.

Each case puts one non-finite number into one input at a token that every
query sees (the first), one that a causal mask hides from the earlier
queries (the last) or one in between, for the seed layers (written out as
the notebooks write them: softmax(scores.masked_fill(mask, -inf)) @ V),
attention.sdpa, nn.MultiheadAttention (with separate query, key and value
inputs, so that a key can be poisoned without its value), the norms and
GELU.
The format is modern_cases.json's (see testdata/torch/modern.py): NaN is
null, +-Inf the strings "inf" and "-inf".

attention.sdpa follows attnrun's rule (README, "NaN and infinities"): the
causal frontier, the window and bool masks replace a hidden score by -inf
(masked_fill), a float mask and ALiBi are added, and with masked_rows
"zeros" a query whose keys are all hidden gets weights of 0 whatever its
scores. modern.py's reference zeroes every NaN row instead (nan_to_num),
which is the same for finite inputs only, so this file patches its attend.

Run from the repository root with Debian's PyTorch 1.13:
    /usr/bin/python3 layers/testdata/nonfinite.py
Re-running leaves git clean.
"""

import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "testdata", "torch"))
import modern  # noqa: E402  (SDPAttention, RMSNorm, mha_case, case, randomize)
import torch_cases as seeds  # noqa: E402  (Self, MultiHead, Wrapper, attend)

NEG_INF = float("-inf")
POISONS = {"nan": float("nan"), "inf": float("inf"), "-inf": NEG_INF}


def poison(x, token, value, feature=1, batch=0):
    """A copy of x (B, T, d) with x[batch, token, feature] = value."""
    y = x.clone()
    y[batch, token, feature] = value
    return y


def sdpa_attend(q, k, v, *, scale, causal=False, align="bottom_right", window=0, softcap=0.0,
                slopes=None, mask=None, mask_kind=None, masked_rows="zeros"):
    """attention.sdpa's scores and softmax (see the module docstring)."""
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
        hidden = hidden | (kpos[None, :] > qpos[:, None])
    if window:
        hidden = hidden | (qpos[:, None] - kpos[None, :] >= window)
    additive = torch.zeros_like(s)
    if slopes is not None:
        additive = additive + slopes[:, None, None] * (kpos[None, :] - qpos[:, None]).float()
    if mask is not None:
        if mask_kind == "keep":
            hidden = hidden | (mask == 0)
        elif mask_kind == "mask":
            hidden = hidden | (mask != 0)
        else:
            additive = additive + mask
    hidden = hidden.expand_as(s)
    w = torch.softmax((s + additive).masked_fill(hidden, NEG_INF), dim=-1)
    if masked_rows == "zeros":
        empty = (hidden | (additive == NEG_INF)).all(dim=-1, keepdim=True)
        w = w.masked_fill(empty, 0.0)
    return w @ v, w


def seed_cases():
    """The seed layers and attention.average, on (2, 5, 4) inputs."""
    cases = {}
    torch.manual_seed(100)
    x = torch.randn(2, 5, 4)
    layers = {}
    torch.manual_seed(101)
    layers["self"] = ("attention.self", dict(d_in=4, d_out=3, weights="linear", qkv_bias=True, scaled=True),
                      seeds.Self(4, 3, bias=True))
    torch.manual_seed(102)
    layers["causal"] = ("attention.causal", dict(d_in=4, d_out=3, context_length=6, qkv_bias=True),
                        seeds.Self(4, 3, bias=True, causal=True))
    torch.manual_seed(103)
    layers["multihead"] = ("attention.multihead",
                           dict(d_in=4, d_out=6, context_length=6, num_heads=3, qkv_bias=True, out_bias=True, causal=True),
                           seeds.MultiHead(4, 6, 3, qkv_bias=True, out_bias=True, causal=True))
    torch.manual_seed(104)
    layers["wrapper"] = ("attention.multihead_wrapper", dict(d_in=4, d_out=2, context_length=6, num_heads=2),
                         seeds.Wrapper(4, 2, 2))
    for token in (0, 4):
        for pname, value in POISONS.items():
            xp = poison(x, token, value)
            with torch.no_grad():
                for scaled, causal in ((False, True), (True, False)):
                    out, w = seeds.attend(xp, xp, xp, causal, 1 / math.sqrt(4) if scaled else 1.0)
                    cases[f"simple_{'causal' if causal else 'scaled'}_t{token}_{pname}"] = modern.case(
                        "attention.simple", dict(scaled=scaled, causal=causal), None, [xp], out, w.unsqueeze(1))
                for name, (type_, config, module) in layers.items():
                    out, w = module(xp)
                    if w.dim() == 3:  # one head: (B, T, T)
                        w = w.unsqueeze(1)
                    cases[f"{name}_t{token}_{pname}"] = modern.case(type_, config, module, [xp], out, w)
                tril = torch.tril(torch.ones(5, 5))
                wei = torch.softmax(torch.zeros(5, 5).masked_fill(tril == 0, NEG_INF), dim=-1)
                cases[f"average_t{token}_{pname}"] = modern.case(
                    "attention.average", {}, None, [xp], wei @ xp, wei.expand(2, 1, 5, 5))
    return cases


def sdpa_case(config, x, memory=None, mask=None):
    module = modern.randomize(modern.SDPAttention(**config))
    with torch.no_grad():
        out, w = module(x, memory, mask)
    inputs = [x] + ([memory] if memory is not None else []) + ([mask] if mask is not None else [])
    return modern.case("attention.sdpa", config, module, inputs, out, w)


def sdpa_cases():
    cases = {}
    torch.manual_seed(200)
    x = torch.randn(2, 5, 4)
    keep = torch.ones(2, 1, 5, 5)
    keep[0, 0, 1, :] = 0  # query 1 of sequence 0 sees nothing
    keep[1, 0, :, 3] = 0  # key 3 of sequence 1 is padding
    additive = torch.randn(2, 2, 5, 5)
    additive[0, 1, 2, :] = NEG_INF
    additive[1, 0, :, 4] = NEG_INF
    configs = {
        "causal": (dict(d=4, num_heads=2, causal=True), None),
        "window": (dict(d=4, num_heads=2, causal=True, window=2), None),
        "keep_zeros": (dict(d=4, num_heads=2, mask="bool", mask_polarity="keep"), keep),
        "keep_nan": (dict(d=4, num_heads=2, mask="bool", mask_polarity="keep", masked_rows="nan"), keep),
        "additive": (dict(d=4, num_heads=2, mask="additive"), additive),
        "softcap": (dict(d=4, num_heads=2, causal=True, softcap=1.5), None),
    }
    for token in (0, 4):
        for pname, value in POISONS.items():
            xp = poison(x, token, value, feature=3)
            for name, (config, mask) in configs.items():
                torch.manual_seed(201)
                cases[f"sdpa_{name}_t{token}_{pname}"] = sdpa_case(config, xp, mask=mask)
    # Cross-attention with more queries than keys, aligned bottom-right: the
    # first query sees no key. The memory is poisoned (its keys and values),
    # or the queries alone.
    torch.manual_seed(202)
    xq, memory = torch.randn(2, 4, 4), torch.randn(2, 3, 4)
    for token in (0, 2):
        for pname, value in POISONS.items():
            mp = poison(memory, token, value, feature=2)
            xp = poison(xq, token + 1, value, feature=2)
            for rows in ("zeros", "nan"):
                config = dict(d=4, num_heads=2, causal=True, masked_rows=rows)
                torch.manual_seed(203)
                cases[f"sdpa_cross_{rows}_m{token}_{pname}"] = sdpa_case(config, xq, mp)
                torch.manual_seed(203)
                cases[f"sdpa_cross_{rows}_x{token + 1}_{pname}"] = sdpa_case(config, xp, memory)
    return cases


def mha_cases():
    """nn.MultiheadAttention with separate query, key and value inputs of
    sequence 0: a key or a value where the causal attn_mask or the
    key_padding_mask hides it (PyTorch adds its masks: a NaN key still
    counts), one that every query sees, and a query."""
    cases = {}
    torch.manual_seed(300)
    q, k, v = torch.randn(2, 4, 4), torch.randn(2, 4, 4), torch.randn(2, 4, 4)
    causal = torch.triu(torch.ones(4, 4), diagonal=1)
    kpm = torch.zeros(2, 4)
    kpm[0, 3] = 1  # key 3 of sequence 0 is padding
    config = dict(embed_dim=4, num_heads=2, batch_first=True)
    for pname, value in POISONS.items():
        for where, (tensors, token) in {"query0": ((0,), 0), "key3": ((1,), 3), "value3": ((2,), 3),
                                        "key0": ((1,), 0), "value1": ((2,), 1)}.items():
            inputs = [q, k, v]
            for i in tensors:
                inputs[i] = poison(inputs[i], token, value, feature=3)
            torch.manual_seed(301)
            cases[f"mha_causal_{where}_{pname}"] = modern.mha_case(
                dict(config, attn_mask="bool"), inputs, {"attn_mask": causal}, {})
            torch.manual_seed(302)
            cases[f"mha_padded_{where}_{pname}"] = modern.mha_case(
                dict(config, key_padding_mask="bool"), inputs, {"key_padding_mask": kpm}, {"average_attn_weights": False})
    return cases


def norm_cases():
    """LayerNorm, RMSNorm and GELU with one poisoned element."""
    cases = {}
    torch.manual_seed(400)
    x = torch.randn(2, 3, 8)
    for pname, value in POISONS.items():
        xp = poison(x, 1, value, feature=2)
        torch.manual_seed(401)
        m = modern.randomize(nn.LayerNorm(8))
        with torch.no_grad():
            cases[f"layernorm_{pname}"] = modern.case("norm.layer", dict(d=8), m, [xp], m(xp))
        torch.manual_seed(402)
        m = modern.randomize(modern.RMSNorm(8))
        with torch.no_grad():
            cases[f"rmsnorm_{pname}"] = modern.case("norm.rms", dict(d=8), m, [xp], m(xp))
        for approximate in ("none", "tanh"):  # GELU(-inf) is -inf·0: NaN
            cases[f"gelu_{approximate}_{pname}"] = modern.case(
                "activation.gelu", dict(approximate=approximate), None, [xp], nn.GELU(approximate=approximate)(xp))
    return cases


def encode(v):
    """JSON text for v, with each float written in the fewest digits that
    read back as the same float32 (the values are float32). Dicts keep
    their order: a state_dict's is the parameters'."""
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + encode(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(encode(x) for x in v) + "]"
    if isinstance(v, float):
        return str(np.float32(v))
    return json.dumps(v)


def main():
    modern.attend = sdpa_attend  # SDPAttention.forward calls modern.attend
    cases = {}
    for make in (seed_cases, sdpa_cases, mha_cases, norm_cases):
        cases.update(make())
    path = os.path.join(HERE, "nonfinite_cases.json")
    with open(path, "w") as f:
        f.write(encode(dict(sorted(cases.items()))) + "\n")
    print(f"{len(cases)} cases in {path}")


if __name__ == "__main__":
    main()
