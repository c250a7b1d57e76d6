"""Writes reference.json: inputs and PyTorch's outputs for attnmath's tests.

Run with Debian's PyTorch (1.13, CPU, float32): /usr/bin/python3 reference.py
Each function is checked against the PyTorch expression its doc names:
Linear against F.linear, Softmax against torch.softmax, Attend against
softmax(scale * q @ k^T + mask, with later keys masked_fill'ed to -inf when
causal) @ v, written out per head, grouped-query heads repeat_interleave'd.
"""
import json
import math

import torch
import torch.nn.functional as F

torch.manual_seed(0)
out = {"torch": torch.__version__, "linear": [], "softmax": [], "attend": []}


def flat(t):
    vals = []
    for v in t.reshape(-1).tolist():
        if math.isnan(v):
            vals.append("nan")
        elif math.isinf(v):
            vals.append("inf" if v > 0 else "-inf")
        else:
            vals.append(v)
    return vals


def linear(name, rows, d_in, d_out, bias):
    x = torch.randn(rows, d_in)
    w = torch.randn(d_out, d_in)
    b = torch.randn(d_out) if bias else None
    y = F.linear(x, w, b)
    out["linear"].append({"name": name, "rows": rows, "in": d_in, "out": d_out,
                          "x": flat(x), "w": flat(w), "b": flat(b) if bias else None, "y": flat(y)})


linear("small with bias", 5, 7, 3, True)
linear("small without bias", 4, 3, 6, False)
linear("blocked", 33, 70, 65, True)


def softmax(name, x):
    out["softmax"].append({"name": name, "rows": x.shape[0], "n": x.shape[1],
                           "x": flat(x), "y": flat(torch.softmax(x, dim=-1))})


inf, nan = float("inf"), float("nan")
softmax("plain", torch.randn(4, 9) * 3)
softmax("non-finite rows", torch.tensor([
    [1.0, -inf, 2.0, 0.5],     # -inf is a weight of 0
    [-inf, -inf, -inf, -inf],  # nothing visible: NaN
    [1.0, nan, 2.0, 0.5],      # NaN poisons the row
    [1.0, inf, 2.0, 0.5],      # +Inf too (inf - inf)
    [100.0, 0.0, -100.0, 88.0],
]))


def attend(name, B, H, Tq, Tk, d, kv=None, dv=None, scale=None, causal=False,
           mask=None, zero_empty=False, weights=True, q=None, k=None, v=None):
    kv = kv or H
    dv = dv or d
    q = torch.randn(B, Tq, H * d) if q is None else q
    k = torch.randn(B, Tk, kv * d) if k is None else k
    v = torch.randn(B, Tk, kv * dv) if v is None else v
    s = 1 / math.sqrt(d) if scale is None else scale
    qh = q.view(B, Tq, H, d).transpose(1, 2)
    kh = k.view(B, Tk, kv, d).transpose(1, 2).repeat_interleave(H // kv, dim=1)
    vh = v.view(B, Tk, kv, dv).transpose(1, 2).repeat_interleave(H // kv, dim=1)
    scores = s * qh @ kh.transpose(-1, -2)
    if mask is not None:
        m = mask if mask.dim() == 2 else mask[:, None]
        scores = scores + m
    if causal:
        i = torch.arange(Tq)[:, None] + (Tk - Tq)
        j = torch.arange(Tk)[None, :]
        scores = scores.masked_fill(j > i, -inf)
    w = torch.softmax(scores, dim=-1)
    if zero_empty:
        empty = torch.isinf(scores).all(dim=-1, keepdim=True) & (scores < 0).all(dim=-1, keepdim=True)
        w = w.masked_fill(empty, 0.0)
    o = (w @ vh).transpose(1, 2).reshape(B, Tq, H * dv)
    case = {"name": name, "batch": B, "heads": H, "kv_heads": kv if kv != H else 0,
            "queries": Tq, "keys": Tk, "head_dim": d, "value_dim": dv if dv != d else 0,
            "scale": scale or 0, "causal": causal, "zero_empty_rows": zero_empty,
            "mask": flat(mask) if mask is not None else None,
            "q": flat(q), "k": flat(k), "v": flat(v), "out": flat(o),
            "weights": flat(w) if weights else None}
    out["attend"].append(case)


attend("full", 2, 2, 5, 5, 4)
attend("causal", 2, 2, 5, 5, 4, causal=True)
attend("causal without weights", 1, 3, 7, 7, 4, causal=True, weights=False)
attend("grouped heads", 2, 4, 6, 6, 4, kv=2, dv=3, causal=True)
attend("decode step", 2, 2, 2, 6, 4, causal=True)
pad = torch.zeros(5, 5)
pad[:, 3:] = -inf  # the last two keys are padding
attend("shared mask and scale", 2, 2, 5, 5, 4, scale=0.5, mask=pad)
per = torch.randn(2, 4, 4)
per[1, 2, :] = -inf  # query 2 of sequence 1 sees nothing
attend("per-sequence mask", 2, 2, 4, 4, 4, mask=per)
attend("per-sequence mask, empty rows zero", 2, 2, 4, 4, 4, mask=per, zero_empty=True)
vnan = torch.randn(1, 4, 4)
vnan[0, 3, 1] = nan  # a value hidden from queries 0-2 still reaches them (0 * NaN)
knan = torch.randn(1, 4, 4)
knan[0, 2, 0] = nan  # a key hidden from queries 0-1 does not reach them
attend("causal non-finite", 1, 1, 4, 4, 4, causal=True, k=knan, v=vnan)
attend("tiles", 2, 2, 70, 70, 8, causal=True, weights=False)

with open("reference.json", "w") as f:
    json.dump(out, f, separators=(",", ":"))
    f.write("\n")
