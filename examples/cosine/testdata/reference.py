"""PyTorch reference for the attention.cosine example layer.

CosineAttention below is the PyTorch twin of examples/cosine (package cosine):
three nn.Linear projections named W_query, W_key and W_value, queries and keys
normalized with F.normalize(x, p=2, dim=-1, eps=1e-12), that is
x / max(||x||_2, 1e-12), so a zero vector stays zero, and

    weights = softmax(scale * q_hat @ k_hat^T)   (future keys masked if causal)
    output  = weights @ v

For each model config in this folder (cosine.yaml, noncausal.yaml) the script
builds the same model right after torch.manual_seed(SEED), so attnrun's seeded
Init(SEED) must draw the very same weights, then writes, next to this file:

    <case>_weights.npz    state dict under attnrun's model parameter names
    <case>_input.npy      the input
    <case>_expected.npy   PyTorch's output (float32)
    <case>_attention.npy  the attention layer's weights, (B, 1, T, T) as
                          attnrun's hook reports them (B = 1 for a (T, d) input)
    <case>_torch.onnx     the PyTorch model itself, as torch.onnx.export writes
                          it, for `attnrun import` to lift back into
                          attention.cosine (see EXPORTS for opsets and axes)

Run it with Debian's PyTorch (not the python3 first on PATH):
    /usr/bin/python3 examples/cosine/testdata/reference.py
The files it writes are byte-for-byte the same on every run.
"""

import io
import os
import zipfile

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from torch import nn

SEED = 2024
HERE = os.path.dirname(os.path.abspath(__file__))


class CosineAttention(nn.Module):
    """Single-head attention scored by scaled cosine similarity."""

    def __init__(self, d_in, d_out, scale=10.0, causal=False, qkv_bias=False):
        super().__init__()
        # Created in this order so that the state_dict (and the random draws
        # after manual_seed) go W_query, W_key, W_value, weight before bias.
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.scale = scale
        self.causal = causal
        self.attention_weights = None

    def forward(self, x):
        q = F.normalize(self.W_query(x), p=2, dim=-1, eps=1e-12)
        k = F.normalize(self.W_key(x), p=2, dim=-1, eps=1e-12)
        v = self.W_value(x)
        scores = self.scale * (q @ k.transpose(-2, -1))
        if self.causal:
            t = x.shape[-2]
            future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
            scores = scores.masked_fill(future, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        self.attention_weights = weights
        return weights @ v


class CosineThenLinear(nn.Module):
    """testdata/cosine.yaml: attention.cosine "attn", then nn.linear "proj"."""

    def __init__(self):
        super().__init__()
        self.attn = CosineAttention(4, 3, causal=True, qkv_bias=True)
        self.proj = nn.Linear(3, 2)

    def forward(self, x):
        return self.proj(self.attn(x))


class CosineOnly(nn.Module):
    """testdata/noncausal.yaml: a single attention.cosine "attn"."""

    def __init__(self):
        super().__init__()
        self.attn = CosineAttention(3, 4, scale=5.0)

    def forward(self, x):
        return self.attn(x)


def cosine_input():
    """Two sequences of five 4-wide tokens."""
    return torch.randn(2, 5, 4)


def noncausal_input():
    """One unbatched sequence of six tokens; token 2 is all zeros, so its
    query and key are zero (no bias) and F.normalize's clamp decides the
    result: that query attends uniformly, and that key scores 0 everywhere."""
    x = torch.randn(6, 3)
    x[2] = 0
    return x


def save_npy(path, array):
    with open(path, "wb") as f:
        np.lib.format.write_array(f, np.ascontiguousarray(array, dtype=np.float32))


def save_npz(path, arrays):
    """np.savez with a fixed timestamp, so that rewriting changes no byte."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, array in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(array, dtype=np.float32))
            z.writestr(zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), buf.getvalue())


# How each case is exported to ONNX: the opset, and the input axes left
# symbolic. The causal case needs opset 14 or later (torch.triu exports as
# Trilu) and is exported with dynamic batch and sequence axes; the other is
# a static (T, d) graph at the oldest opset attnrun writes, so the lifter
# sees both of PyTorch's styles.
EXPORTS = {
    "cosine": (17, {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}),
    "noncausal": (13, None),
}


def export_onnx(name, model, x):
    """Writes <name>_torch.onnx and checks it with onnx.checker."""
    opset, axes = EXPORTS[name]
    path = os.path.join(HERE, name + "_torch.onnx")
    torch.onnx.export(model, (x,), path, opset_version=opset, input_names=["x"],
                      output_names=["y"], dynamic_axes=axes)
    onnx.checker.check_model(onnx.load(path), full_check=True)


def write_case(name, build, make_input):
    torch.manual_seed(SEED)
    model = build().eval()
    x = make_input()
    with torch.no_grad():
        y = model(x)
        export_onnx(name, model, x)
    weights = model.attn.attention_weights
    if weights.dim() == 2:
        weights = weights.unsqueeze(0)  # a (T, d) input is one sequence
    weights = weights.unsqueeze(1)  # of one head: (B, 1, T, T)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    save_npz(os.path.join(HERE, name + "_weights.npz"), state)
    save_npy(os.path.join(HERE, name + "_input.npy"), x.numpy())
    save_npy(os.path.join(HERE, name + "_expected.npy"), y.numpy())
    save_npy(os.path.join(HERE, name + "_attention.npy"), weights.numpy())
    print(f"{name}: params {list(state)}, input {tuple(x.shape)}, "
          f"output {tuple(y.shape)}, attention {tuple(weights.shape)}")
    print(y)


if __name__ == "__main__":
    write_case("cosine", CosineThenLinear, cosine_input)
    write_case("noncausal", CosineOnly, noncausal_input)
