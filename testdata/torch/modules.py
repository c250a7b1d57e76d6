"""PyTorch reference modules for attnrun's layers.

Each class here is the PyTorch twin of one attnrun layer (or of a small
composite built from several). attnrun's Go code is checked against them:
seeds.py uses them to compute the presets' expected outputs, and
export_onnx.py exports them to ONNX for the executor and the cross-check.

Two things are part of the contract, not accidents of style:

* Parameter names. `named_parameters()` yields exactly the names attnrun's
  layers use (W_query.weight, heads.0.W_key.weight, out_proj.bias, weight),
  so a state dict can be handed to attnrun as it is. Masks are non-persistent
  buffers, so state_dict() holds parameters only.
* Construction order. Parameters are created in the order the seed notebooks
  create theirs (query, key, value, then position, then projections), so
  building a module right after torch.manual_seed(n) draws the same numbers
  the notebook drew. seeds.py relies on it.

Every module takes (T, d) or (B, T, d) and keeps the rank of its input.
Attention modules remember the weights of their last forward pass in
`attention_weights`: that is what attnrun's attention hook reports.
"""

import torch
from torch import nn


def future_mask(t):
    """Returns a (t, t) bool mask that is True where a key lies after the query.

    Built from arange rather than triu so that it traces to Range/Greater,
    which every ONNX opset from 13 supports, with a symbolic sequence length.
    """
    positions = torch.arange(t)
    return positions.unsqueeze(0) > positions.unsqueeze(1)


def attend(queries, keys, values, future=None, scaled=True, dropout=None):
    """Scaled dot-product attention over the last two axes.

    Returns (context, weights). Masked scores become -inf before the softmax,
    so a query gives exactly zero weight to the keys it must not see. Scores
    are divided by sqrt(d_k) (not multiplied by its inverse) to round the way
    the reference notebooks do.
    """
    scores = queries @ keys.transpose(-2, -1)
    if future is not None:
        scores = scores.masked_fill(future, float("-inf"))
    if scaled:
        scores = scores / keys.shape[-1] ** 0.5
    weights = torch.softmax(scores, dim=-1)
    if dropout is not None:
        weights = dropout(weights)
    return weights @ values, weights


def check_length(t, context_length, what):
    """Refuses a sequence longer than the positions a module was built for."""
    if t > context_length:
        raise ValueError(f"{what}: sequence length {t} exceeds context_length {context_length}")


class SimpleAttention(nn.Module):
    """attention.simple: softmax(X Xᵀ) X, the input serving as query, key and value."""

    def __init__(self, scaled=False, causal=False):
        super().__init__()
        self.scaled = scaled
        self.causal = causal
        self.attention_weights = None

    def forward(self, x):
        future = future_mask(x.shape[-2]) if self.causal else None
        context, self.attention_weights = attend(x, x, x, future, self.scaled)
        return context


class SelfAttention(nn.Module):
    """attention.self with `weights: linear`: Q, K and V from nn.Linear projections."""

    def __init__(self, d_in, d_out, qkv_bias=False, causal=False, scaled=True):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.causal = causal
        self.scaled = scaled
        self.attention_weights = None

    def forward(self, x):
        future = future_mask(x.shape[-2]) if self.causal else None
        context, self.attention_weights = attend(
            self.W_query(x), self.W_key(x), self.W_value(x), future, self.scaled)
        return context


class SelfAttentionMatrix(nn.Module):
    """attention.self with `weights: matrix`: bare (d_in, d_out) parameters, X @ W.

    `init` draws each matrix; torch.rand (U(0, 1)) is attnrun's default, and a
    notebook that used torch.randn is replayed by passing torch.randn.
    """

    def __init__(self, d_in, d_out, causal=False, scaled=True, init=torch.rand):
        super().__init__()
        self.W_query = nn.Parameter(init(d_in, d_out))
        self.W_key = nn.Parameter(init(d_in, d_out))
        self.W_value = nn.Parameter(init(d_in, d_out))
        self.causal = causal
        self.scaled = scaled
        self.attention_weights = None

    def forward(self, x):
        future = future_mask(x.shape[-2]) if self.causal else None
        context, self.attention_weights = attend(
            x @ self.W_query, x @ self.W_key, x @ self.W_value, future, self.scaled)
        return context


class CausalAttention(nn.Module):
    """attention.causal: linear self-attention under a fixed-size causal mask.

    The mask is a (context_length, context_length) buffer cut to the input's
    length, so sequences longer than context_length are refused. Dropout acts
    on the attention weights, in train mode only.
    """

    def __init__(self, d_in, d_out, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.context_length = context_length
        self.register_buffer("mask", future_mask(context_length), persistent=False)
        self.attention_weights = None

    def forward(self, x):
        t = x.shape[-2]
        check_length(t, self.context_length, "CausalAttention")
        context, self.attention_weights = attend(
            self.W_query(x), self.W_key(x), self.W_value(x),
            self.mask[:t, :t], dropout=self.dropout)
        return context


class MultiHeadWrapper(nn.Module):
    """attention.multihead_wrapper: independent causal heads, outputs concatenated.

    The output width is num_heads * d_out; attention_weights stacks the heads'
    weights on a new axis just before the last two: (..., H, T, T).
    """

    def __init__(self, d_in, d_out, context_length, num_heads, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
            for _ in range(num_heads))
        self.attention_weights = None

    def forward(self, x):
        context = torch.cat([head(x) for head in self.heads], dim=-1)
        self.attention_weights = torch.stack(
            [head.attention_weights for head in self.heads], dim=-3)
        return context


class MultiHeadAttention(nn.Module):
    """attention.multihead: one projection per Q/K/V split into heads, then out_proj.

    Head h works on columns h*head_dim:(h+1)*head_dim of the projections, so
    this equals num_heads CausalAttention heads of width d_out/num_heads whose
    weights are slices of W_query, W_key and W_value, followed by out_proj.
    """

    def __init__(self, d_in, d_out, context_length, num_heads, dropout=0.0,
                 qkv_bias=False, out_bias=True, causal=True):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(f"num_heads {num_heads} does not divide d_out {d_out}")
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out, bias=out_bias)
        self.dropout = nn.Dropout(dropout)
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.causal = causal
        self.register_buffer("mask", future_mask(context_length), persistent=False)
        self.attention_weights = None

    def forward(self, x):
        unbatched = x.dim() == 2
        if unbatched:
            x = x.unsqueeze(0)
        b, t, _ = x.shape
        check_length(t, self.context_length, "MultiHeadAttention")

        def heads(y):  # (B, T, d_out) -> (B, H, T, head_dim)
            return y.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)

        future = self.mask[:t, :t] if self.causal else None
        context, weights = attend(
            heads(self.W_query(x)), heads(self.W_key(x)), heads(self.W_value(x)),
            future, dropout=self.dropout)
        context = context.transpose(1, 2).contiguous().view(b, t, self.num_heads * self.head_dim)
        out = self.out_proj(context)
        if unbatched:
            out, weights = out.squeeze(0), weights.squeeze(0)
        self.attention_weights = weights
        return out


class CausalAverage(nn.Module):
    """attention.average: each position becomes the mean of itself and its past.

    Computed as attention with all-zero scores under a causal mask: the
    softmax of equal scores is uniform over the visible positions, which is
    the running mean. Being attention-shaped, it has weights to report.
    """

    def __init__(self):
        super().__init__()
        self.attention_weights = None

    def forward(self, x):
        future = future_mask(x.shape[-2])
        scores = torch.zeros_like(future, dtype=x.dtype).masked_fill(future, float("-inf"))
        self.attention_weights = torch.softmax(scores, dim=-1)
        return self.attention_weights @ x


class LearnedPosition(nn.Module):
    """position.learned: adds a learned vector per absolute position to the input.

    Equivalent to nn.Embedding(context_length, d) looked up at arange(T), and
    initialized the same way (N(0, 1)), so it draws what nn.Embedding draws.
    """

    def __init__(self, context_length, d):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(context_length, d))
        nn.init.normal_(self.weight)
        self.context_length = context_length

    def forward(self, x):
        t = x.shape[-2]
        check_length(t, self.context_length, "LearnedPosition")
        return x + self.weight[:t]


class PositionalAttention(nn.Module):
    """A learned position embedding added to the input of an attention module.

    The attention module is built by the caller before the position table, as
    the seed notebooks do (their heads create W_q, W_k, W_v, then the
    embedding). Parameters: attn.* then pos.weight. The embedding is added to
    the input, so the attention's d_in is the embedding width.
    """

    def __init__(self, attention, context_length, d):
        super().__init__()
        self.attn = attention
        self.pos = LearnedPosition(context_length, d)

    @property
    def attention_weights(self):
        return self.attn.attention_weights

    def forward(self, x):
        return self.attn(self.pos(x))


class PositionalHeads(nn.Module):
    """Causal heads that each add their own position embedding, concatenated, projected.

    Every head is a PositionalAttention around a CausalAttention; their
    outputs (num_heads * d_out wide) go through out_proj back to d_out.
    """

    def __init__(self, d_in, d_out, context_length, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            PositionalAttention(CausalAttention(d_in, d_out, context_length, 0.0, qkv_bias),
                                context_length, d_in)
            for _ in range(num_heads))
        self.out_proj = nn.Linear(num_heads * d_out, d_out, bias=qkv_bias)

    def forward(self, x):
        return self.out_proj(torch.cat([head(x) for head in self.heads], dim=-1))


class TransformerBlock(nn.Module):
    """A pre-norm GPT block: x + MHA(LN(x)), then x + MLP(LN(x)).

    The MLP is Linear(d, 4d), exact GELU (erf, not tanh), Linear(4d, d).
    """

    def __init__(self, d, context_length, num_heads, dropout=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.attn = MultiHeadAttention(d, d, context_length, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TorchCausalSelfAttention(nn.Module):
    """torch.nn.MultiheadAttention as causal self-attention, batch first.

    Returns the output and the attention weights averaged over heads, as
    need_weights=True gives them. The causal mask is a buffer cut to length.
    """

    def __init__(self, d, num_heads, context_length):
        super().__init__()
        self.mha = nn.MultiheadAttention(d, num_heads, batch_first=True)
        self.context_length = context_length
        self.register_buffer("mask", future_mask(context_length), persistent=False)

    def forward(self, x):
        t = x.shape[-2]
        check_length(t, self.context_length, "TorchCausalSelfAttention")
        return self.mha(x, x, x, attn_mask=self.mask[:t, :t], need_weights=True)


class TorchCrossAttention(nn.Module):
    """torch.nn.MultiheadAttention as cross-attention with a key padding mask.

    Queries come from `query` (B, Tq, d), keys and values from `memory`
    (B, Tk, d); key_padding_mask (B, Tk) is True at padded memory positions.
    """

    def __init__(self, d, num_heads):
        super().__init__()
        self.mha = nn.MultiheadAttention(d, num_heads, batch_first=True)

    def forward(self, query, memory, key_padding_mask):
        out, _ = self.mha(query, memory, memory, key_padding_mask=key_padding_mask,
                          need_weights=False)
        return out
