"""Writes torch_cases.json, the PyTorch reference for the layer tests.

Each case replays a seed notebook's random draws (or, for the cases after the
notebooks, a fixed seed of our own) with reference modules that mirror the
attnrun layers, and records:
  params   the module's state_dict() in order, without the mask buffers:
           names, order and shapes are what attnrun's Params() must list
  input    the input tensor
  output   PyTorch's output, full float32 precision
  weights  the attention weights, (B, H, T, T), or (T, T) for 2-D input
The Go tests compare attnrun's layers against these numbers, and separately
against the 4-decimal tensors the notebooks print.

Run with Debian's PyTorch 1.13 (the notebook seeds reproduce there):
    /usr/bin/python3 layers/testdata/torch_cases.py
"""

import json
import math
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "torch"))
from common import JOURNEY, SENTENCE  # noqa: E402  (the notebooks' inputs, shared with seeds.py)


def attend(q, k, v, causal, scale):
    """Scaled dot-product attention over the last two axes; (output, weights)."""
    scores = q @ k.transpose(-2, -1)
    if causal:
        n = scores.shape[-1]
        future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(future, -math.inf)
    weights = torch.softmax(scores * scale, dim=-1)
    return weights @ v, weights


class Self(nn.Module):
    """attention.self; also attention.causal (causal=True) with no dropout.
    matrix draws bare (d_in, d_out) parameters with torch.rand, or with
    torch.randn when matrix == "randn" (notebook 003)."""

    def __init__(self, d_in, d_out, matrix=False, bias=False, causal=False):
        super().__init__()
        if matrix:
            draw = torch.randn if matrix == "randn" else torch.rand
            self.W_query = nn.Parameter(draw(d_in, d_out))
            self.W_key = nn.Parameter(draw(d_in, d_out))
            self.W_value = nn.Parameter(draw(d_in, d_out))
        else:
            self.W_query = nn.Linear(d_in, d_out, bias=bias)
            self.W_key = nn.Linear(d_in, d_out, bias=bias)
            self.W_value = nn.Linear(d_in, d_out, bias=bias)
        self.matrix, self.causal, self.d_out = matrix, causal, d_out

    def project(self, x, w):
        return x @ w if self.matrix else w(x)

    def forward(self, x):
        q, k, v = (self.project(x, w) for w in (self.W_query, self.W_key, self.W_value))
        return attend(q, k, v, self.causal, 1 / math.sqrt(self.d_out))


class Wrapper(nn.Module):
    """attention.multihead_wrapper: causal heads, concatenated."""

    def __init__(self, d_in, d_out, num_heads):
        super().__init__()
        self.heads = nn.ModuleList([Self(d_in, d_out, causal=True) for _ in range(num_heads)])

    def forward(self, x):
        outs, weights = zip(*(h(x) for h in self.heads))
        return torch.cat(outs, dim=-1), torch.stack(weights, dim=1)


class MultiHead(nn.Module):
    """attention.multihead: split heads and out_proj, on (B, T, d_in)."""

    def __init__(self, d_in, d_out, num_heads, qkv_bias, out_bias, causal):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out, bias=out_bias)
        self.num_heads, self.causal = num_heads, causal

    def forward(self, x):
        b, t, _ = x.shape
        d_out = self.out_proj.in_features
        head_dim = d_out // self.num_heads
        split = lambda y: y.view(b, t, self.num_heads, head_dim).transpose(1, 2)
        context, weights = attend(split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x)),
                                  self.causal, 1 / math.sqrt(head_dim))
        return self.out_proj(context.transpose(1, 2).reshape(b, t, d_out)), weights


def params(module, prefix=""):
    return {prefix + name: value.tolist() for name, value in module.state_dict().items()}


def case(module, x, output, weights=None, prefix=""):
    c = {"params": params(module, prefix), "input": x.tolist(), "output": output.tolist()}
    if weights is not None:
        c["weights"] = weights.tolist()
    return c


def main():
    cases = {}
    with torch.no_grad():
        # 000 In[36] and 004 In[89]: SelfAttention_v1, bare torch.rand matrices, seed 123.
        torch.manual_seed(123)
        m = Self(3, 2, matrix=True)
        cases["rand123"] = case(m, JOURNEY, *m(JOURNEY))
        # 000 In[57]: the same weights, masked.
        m.causal = True
        cases["rand123_causal"] = case(m, JOURNEY, *m(JOURNEY))

        # 003 In[3]: bare torch.randn matrices, seed 1.
        torch.manual_seed(1)
        m = Self(3, 2, matrix="randn")
        cases["randn1"] = case(m, JOURNEY, *m(JOURNEY))

        # 000 In[47]: SelfAttention_v2 (nn.Linear), seed 789.
        torch.manual_seed(789)
        m = Self(3, 2)
        cases["linear789"] = case(m, JOURNEY, *m(JOURNEY))

        # 004 In[95]: SelfAttention_v2, seed 123.
        torch.manual_seed(123)
        m = Self(3, 2)
        cases["linear123"] = case(m, JOURNEY, *m(JOURNEY))

        # 000 In[66]: MultiHeadAttentionWrapper, seed 123, two heads, a batch of two.
        torch.manual_seed(123)
        m = Wrapper(3, 2, 2)
        batch = torch.stack((JOURNEY, JOURNEY))
        cases["wrapper123"] = case(m, batch, *m(batch))

        # 001: one generator seeded with 239 in In[1], drawn from cell after cell.
        torch.manual_seed(239)
        # In[4]: SelfAttentionV1 with nn.Linear(3, 3) projections.
        m = Self(3, 3)
        cases["bishop_self"] = case(m, SENTENCE, *m(SENTENCE))
        # In[5]: the same plus a learned position embedding added to the
        # input; the chain position.learned -> attention.self, whose
        # parameters are prefixed "position." and "attn.".
        attn = Self(3, 3)
        pos = nn.Embedding(5, 3)
        out, weights = attn(SENTENCE + pos.weight)
        cases["bishop_positional"] = {
            "params": dict(params(pos, "position."), **params(attn, "attn.")),
            "input": SENTENCE.tolist(), "output": out.tolist(), "weights": weights.tolist()}
        # In[6] and In[7] draw CausalAttention heads with position embeddings
        # and an output projection; drawn here only to advance the generator.
        for _ in range(3):
            Self(3, 3)
            nn.Embedding(5, 3)
        nn.Linear(6, 3, bias=False)
        # In[9]: MultiHeadAttention on torch.rand(5, 6). This replay does not
        # reproduce the tensor In[9] prints (the notebook's generator state
        # there is unknown), so this case checks against PyTorch only.
        x = torch.rand(5, 6)
        m = MultiHead(6, 6, 2, qkv_bias=False, out_bias=True, causal=True)
        out, weights = m(x.unsqueeze(0))
        cases["bishop_multihead"] = case(m, x, out[0], weights)

        # 002 In[22]: the causal average by the tril/softmax trick, seed 1337.
        torch.manual_seed(1337)
        x = torch.randn(4, 8, 2)
        tril = torch.tril(torch.ones(8, 8))
        wei = torch.softmax(torch.zeros(8, 8).masked_fill(tril == 0, float("-inf")), dim=-1)
        cases["average1337"] = {"params": {}, "input": x.tolist(), "output": (wei @ x).tolist(),
                                "weights": wei.expand(4, 1, 8, 8).tolist()}

        # Beyond the notebooks: scaled simple attention, biases, batches, the
        # non-causal path, nn.Linear.
        batch = torch.stack((JOURNEY, JOURNEY.flip(0)))
        out, weights = attend(batch, batch, batch, True, 1 / math.sqrt(3))
        cases["simple_scaled_causal"] = {"params": {}, "input": batch.tolist(), "output": out.tolist(),
                                         "weights": weights.unsqueeze(1).tolist()}
        torch.manual_seed(7)
        x = torch.randn(2, 5, 4)
        m = MultiHead(4, 6, 3, qkv_bias=True, out_bias=True, causal=True)
        cases["multihead_bias"] = case(m, x, *m(x))
        torch.manual_seed(8)
        x = torch.randn(2, 4, 4)
        m = MultiHead(4, 4, 2, qkv_bias=False, out_bias=False, causal=False)
        cases["multihead_noncausal"] = case(m, x, *m(x))
        torch.manual_seed(9)
        x = torch.randn(2, 5, 4)
        m = Self(4, 3, bias=True, causal=True)
        out, weights = m(x)
        cases["causal_bias"] = case(m, x, out, weights.unsqueeze(1))
        torch.manual_seed(10)
        x = torch.randn(2, 3, 4)
        m = nn.Linear(4, 5)
        cases["linear"] = case(m, x, m(x))

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_cases.json")
    with open(path, "w") as f:
        json.dump(cases, f, indent=1)
        f.write("\n")
    for name, c in cases.items():
        first = torch.tensor(c["output"]).reshape(-1, torch.tensor(c["output"]).shape[-1])[0]
        print(name, [round(v, 4) for v in first.tolist()], list(c["params"]))


if __name__ == "__main__":
    main()
