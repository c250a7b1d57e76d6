"""Hugging Face references for attention.linear and attention.mla.

attention.linear is Qwen3-Next's gated DeltaNet block
(transformers.models.qwen3_next.modeling_qwen3_next.Qwen3NextGatedDeltaNet)
and attention.mla is DeepSeek-V3's multi-head latent attention
(transformers.models.deepseek_v3.modeling_deepseek_v3.DeepseekV3Attention),
both built from tiny config classes with seeded weights (no model hub).

Writes layers/testdata/frontier_layers.json, one case per layer
configuration:
  type, config   the attnrun layer ID and its YAML fields
  params         the module's state_dict(), names in order
  inputs         the layer's input, (B, T, d) or (T, d)
  output         the module's output, float32 on CPU: for gated_delta the
                 module as Hugging Face runs a prefill (its chunked
                 algorithm, torch_chunk_gated_delta_rule)
  recurrent      (attention.linear) the same block with the token-by-token
                 recurrence (torch_recurrent_gated_delta_rule, or its
                 rule-swapped copy below)
  float64        the module run in float64: the exact value both float32
                 paths approximate
  steps          the module's output fed one token at a time through its
                 cache (DynamicCache), as Hugging Face decodes
  weights        (attention.mla) attention weights (B, H, T, T)

The update rules other than gated_delta (linear, gated, delta) have no
Hugging Face module: SwappedRuleNet below is Qwen3NextGatedDeltaNet with the
rule swapped, checked here to equal the Hugging Face module (within 1e-6, the
rounding of differently aligned reductions) when its rule is gated_delta.

Run from the repository root with the reference virtualenv
(torch 2.15, transformers 5.23):
    ~/.cache/attnrun/venv/bin/python layers/testdata/frontier_layers.py
The output is deterministic (re-running leaves git clean).

The live cross-check (scripts/frontier_crosscheck.sh) draws fresh cases:
    ... frontier_layers.py --seed N --out DIR
writes DIR/frontier_layers.json from seeds shifted by N, and for each case
DIR/<case>/ with model.yaml (the layer alone, named l), weights.npz (its
state dict under attnrun's model names), input.npy, expected_float64.npy
(the module in float64, rounded) and expected.npy (the
module's output), for `attnrun run`, `attnrun export` and ONNX Runtime.
"""

import argparse
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.cache_utils import DynamicCache
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as ds
from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config
from transformers.models.qwen3_next import modeling_qwen3_next as qn
from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig

HERE = os.path.dirname(os.path.abspath(__file__))

# Every case draws its numbers from its own seed plus SEED_OFFSET: 0 for the
# committed cases, 10000·N for --seed N (the cases' seeds stay below 10000).
SEED_OFFSET = 0


def tolist(t):
    """t as nested lists of float32 values, each written with the 9
    significant digits that identify a float32 (half the size of
    float64's shortest form)."""
    def short(x):
        return [short(e) for e in x] if isinstance(x, list) else float("%.9g" % x)
    return short(t.detach().to(torch.float32).tolist())


def seeded_params(module, seed):
    """Draw every parameter from a seeded generator, away from the special
    values of a fresh module (norm weights of ones, dt_bias of ones), so
    that a wrong parameter shows: linear and conv weights keep their
    PyTorch scale, A_log is drawn so decays are neither 0 nor 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            u = torch.rand(p.shape, generator=g, dtype=torch.float64)
            if name == "A_log":
                v = u * 1.5 - 1.5  # A = exp(A_log) in (0.22, 1)
            elif name == "dt_bias":
                v = u * 2 - 1
            elif "norm" in name:
                v = 0.5 + u
            else:
                fan_in = p.shape[1] * (p.shape[2] if p.dim() == 3 else 1) if p.dim() > 1 else p.shape[0]
                v = (u * 2 - 1) / math.sqrt(fan_in)
            p.copy_(v.to(p.dtype))


# ---------------------------------------------------------- attention.linear

def recurrent_rule(query, key, value, g, beta, use_qk_l2norm):
    """torch_recurrent_gated_delta_rule with the rule swapped: g None drops
    the decay (the linear and delta rules), beta None drops the delta
    correction (the state adds k vᵀ: the linear and gated rules). With both
    it is Hugging Face's function, step for step."""
    batch, length, num_k_heads, dk = key.shape
    num_v_heads, dv = value.shape[-2:]
    if num_k_heads != num_v_heads:
        query = query.repeat_interleave(num_v_heads // num_k_heads, dim=2)
        key = key.repeat_interleave(num_v_heads // num_k_heads, dim=2)
    query, key, value = [x.transpose(1, 2).contiguous() for x in (query, key, value)]
    if g is not None:
        g = g.transpose(1, 2).contiguous()
    if beta is not None:
        beta = beta.transpose(1, 2).contiguous()
    if use_qk_l2norm:
        query = qn.l2norm(query, dim=-1, eps=1e-6)
        key = qn.l2norm(key, dim=-1, eps=1e-6)
    query = query / (query.shape[-1] ** 0.5)
    state = torch.zeros(batch, num_v_heads, dk, dv, dtype=value.dtype)
    out = torch.zeros_like(value)
    for i in range(length):
        q_t, k_t, v_t = query[:, :, i], key[:, :, i], value[:, :, i]
        if g is not None:
            state = state * g[:, :, i].exp()[..., None, None]
        if beta is not None:
            kv_mem = (state * k_t.unsqueeze(-1)).sum(dim=-2)
            delta = (v_t - kv_mem) * beta[:, :, i].unsqueeze(-1)
        else:
            delta = v_t
        state = state + k_t.unsqueeze(-1) * delta.unsqueeze(-2)
        out[:, :, i] = (state * q_t.unsqueeze(-1)).sum(dim=-2)
    return out.transpose(1, 2).contiguous()


def recurrent_as_chunked(query, key, value, g, beta, initial_state=None, output_final_state=False,
                         use_qk_l2norm_in_kernel=False, **kwargs):
    """torch_recurrent_gated_delta_rule in the place of the chunked
    function, which the Hugging Face block calls for a prefill."""
    return qn.torch_recurrent_gated_delta_rule(query, key, value, g, beta, initial_state=initial_state,
                                               output_final_state=output_final_state,
                                               use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)


class SwappedRuleNet(nn.Module):
    """Qwen3NextGatedDeltaNet with its update rule swapped. The parameters
    keep the Hugging Face names; the decay and beta projections exist only
    for the rules that use them: in_proj_ba (b then a for each key head's
    group of value heads) for gated_delta, in_proj_b for delta, in_proj_a
    for gated, neither for linear; dt_bias and A_log only for the gated
    rules."""

    def __init__(self, cfg, rule, use_qk_l2norm=True):
        super().__init__()
        self.rule = rule
        self.gated = rule in ("gated", "gated_delta")
        self.delta = rule in ("delta", "gated_delta")
        self.use_qk_l2norm = use_qk_l2norm
        self.nv, self.nk = cfg.linear_num_value_heads, cfg.linear_num_key_heads
        self.dk, self.dv = cfg.linear_key_head_dim, cfg.linear_value_head_dim
        self.key_dim, self.value_dim = self.dk * self.nk, self.dv * self.nv
        self.kernel = cfg.linear_conv_kernel_dim
        conv_dim = 2 * self.key_dim + self.value_dim
        if self.gated:
            self.dt_bias = nn.Parameter(torch.ones(self.nv))
            self.A_log = nn.Parameter(torch.zeros(self.nv))
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, bias=False, kernel_size=self.kernel,
                                groups=conv_dim, padding=self.kernel - 1)
        self.in_proj_qkvz = nn.Linear(cfg.hidden_size, 2 * self.key_dim + 2 * self.value_dim, bias=False)
        ba = {"gated_delta": "in_proj_ba", "delta": "in_proj_b", "gated": "in_proj_a"}.get(rule)
        self.ba_name = ba
        if ba:
            width = self.nv * (2 if rule == "gated_delta" else 1)
            setattr(self, ba, nn.Linear(cfg.hidden_size, width, bias=False))
        self.norm = qn.Qwen3NextRMSNormGated(self.dv, eps=cfg.rms_norm_eps)
        self.out_proj = nn.Linear(self.value_dim, cfg.hidden_size, bias=False)

    def forward(self, x):
        batch, length, _ = x.shape
        r = self.nv // self.nk
        qkvz = self.in_proj_qkvz(x).view(batch, length, self.nk, 2 * self.dk + 2 * r * self.dv)
        q, k, v, z = torch.split(qkvz, [self.dk, self.dk, r * self.dv, r * self.dv], dim=3)
        v = v.reshape(batch, length, -1, self.dv)
        z = z.reshape(batch, length, -1, self.dv)
        b = a = None
        if self.rule == "gated_delta":
            ba = self.in_proj_ba(x).view(batch, length, self.nk, 2 * r)
            b, a = torch.split(ba, [r, r], dim=3)
            b, a = b.reshape(batch, length, self.nv), a.reshape(batch, length, self.nv)
        elif self.rule == "delta":
            b = self.in_proj_b(x)
        elif self.rule == "gated":
            a = self.in_proj_a(x)
        q, k, v = (t.reshape(batch, length, -1) for t in (q, k, v))
        mixed = torch.cat((q, k, v), dim=-1).transpose(1, 2)
        mixed = qn.causal_conv1d_fn(mixed, self.conv1d.weight.squeeze(1), None, activation="silu")
        mixed = mixed.transpose(1, 2)
        q, k, v = torch.split(mixed, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        q = q.reshape(batch, length, -1, self.dk)
        k = k.reshape(batch, length, -1, self.dk)
        v = v.reshape(batch, length, -1, self.dv)
        beta = b.sigmoid() if b is not None else None
        g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias) if a is not None else None
        out = recurrent_rule(q, k, v, g, beta, self.use_qk_l2norm)
        out = self.norm(out.reshape(-1, self.dv), z.reshape(-1, self.dv))
        return self.out_proj(out.reshape(batch, length, -1))


def qwen3_next_config(d, heads, key_heads, dk, dv, kernel):
    return Qwen3NextConfig(
        hidden_size=d, linear_num_value_heads=heads, linear_num_key_heads=key_heads,
        linear_key_head_dim=dk, linear_value_head_dim=dv, linear_conv_kernel_dim=kernel,
        num_hidden_layers=1, layer_types=["linear_attention"],
        num_attention_heads=4, num_key_value_heads=2)


def hf_steps(module, x, cfg):
    """The Hugging Face module decoding x one token at a time through its
    cache: the first token runs as a prefill of one (which fills the conv
    and recurrent states), the others take the cached single-token path
    (causal_conv1d_update, torch_recurrent_gated_delta_rule)."""
    cache = DynamicCache(config=cfg)
    rows = []
    with torch.no_grad():
        for t in range(x.shape[1]):
            rows.append(module(x[:, t:t + 1], cache_params=cache))
    return torch.cat(rows, dim=1)


def linear_case(seed, rule, d, heads, key_heads, dk, dv, kernel, shape, unbatched=False, qk_l2norm=True):
    seed += SEED_OFFSET
    cfg = qwen3_next_config(d, heads, key_heads, dk, dv, kernel)
    torch.manual_seed(seed)
    net = SwappedRuleNet(cfg, rule, qk_l2norm)
    seeded_params(net, seed)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed + 1000))
    case = {
        "type": "attention.linear",
        "config": {"d": d, "num_heads": heads, "update_rule": rule},
        "params": {k: tolist(v) for k, v in net.state_dict().items()},
        "inputs": [tolist(x[0] if unbatched else x)],
    }
    if key_heads != heads:
        case["config"]["num_key_heads"] = key_heads
    if dk != d // heads:
        case["config"]["head_k_dim"] = dk
    if dv != d // heads:
        case["config"]["head_v_dim"] = dv
    if kernel != 4:
        case["config"]["conv_kernel_size"] = kernel
    if not qk_l2norm:
        case["config"]["qk_l2norm"] = False
    with torch.no_grad():
        recurrent = net(x)
        case["float64"] = tolist(net.double()(x.double()).float()[0] if unbatched else net.double()(x.double()))
        net.float()
        if rule == "gated_delta":
            hf = qn.Qwen3NextGatedDeltaNet(cfg, 0)
            missing = hf.load_state_dict(net.state_dict())
            assert not missing.missing_keys and not missing.unexpected_keys
            assert list(hf.state_dict()) == list(net.state_dict()), "parameter order differs from Hugging Face's"
            output = hf(x)  # a prefill: torch_chunk_gated_delta_rule
            # The swapped-rule block is Hugging Face's when the rule is
            # gated_delta: its recurrence equals HF's own recurrent function.
            chunked = qn.torch_chunk_gated_delta_rule
            qn.torch_chunk_gated_delta_rule = recurrent_as_chunked
            try:
                hf_recurrent = hf(x)
            finally:
                qn.torch_chunk_gated_delta_rule = chunked
            # Bit for bit but for the memory alignment of reductions.
            assert torch.allclose(hf_recurrent, recurrent, rtol=0, atol=1e-6), "SwappedRuleNet(gated_delta) is not Hugging Face's block"
            steps = hf_steps(hf, x, cfg)
            case["steps"] = tolist(steps[0] if unbatched else steps)
        else:
            output = recurrent
    case["output"] = tolist(output[0] if unbatched else output)
    case["recurrent"] = tolist(recurrent[0] if unbatched else recurrent)
    return case


# -------------------------------------------------------------- attention.mla

def mla_case(seed, d, heads, q_lora, kv_lora, nope, rope, v, shape, interleave=True, bias=False, unbatched=False):
    seed += SEED_OFFSET
    cfg = DeepseekV3Config(
        hidden_size=d, num_attention_heads=heads, num_key_value_heads=heads,
        q_lora_rank=q_lora, kv_lora_rank=kv_lora, qk_nope_head_dim=nope, qk_rope_head_dim=rope,
        v_head_dim=v, rope_interleave=interleave, attention_bias=bias, num_hidden_layers=1)
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    attn = ds.DeepseekV3Attention(cfg, 0)
    seeded_params(attn, seed)
    rotary = ds.DeepseekV3RotaryEmbedding(cfg)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed + 1000))
    batch, length, _ = x.shape

    def run(module, x, positions, mask, cache=None):
        cos, sin = rotary(x, positions)
        return module(x, (cos, sin), mask, past_key_values=cache)

    positions = torch.arange(length)[None].expand(batch, -1)
    causal = torch.full((length, length), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        output, weights = run(attn, x, positions, causal)
        exact, _ = run(attn.double(), x.double(), positions, causal.double())
        attn.float()
        cache = DynamicCache(config=cfg)
        steps = torch.cat([run(attn, x[:, t:t + 1], positions[:, t:t + 1], None, cache)[0]
                           for t in range(length)], dim=1)
    config = {"d": d, "num_heads": heads, "q_lora_rank": q_lora or 0, "kv_lora_rank": kv_lora,
              "qk_nope_head_dim": nope, "qk_rope_head_dim": rope, "v_head_dim": v}
    if not interleave:
        config["rope"] = "half"
    if bias:
        config["attention_bias"] = True
    pick = (lambda t: t[0]) if unbatched else (lambda t: t)
    return {
        "type": "attention.mla",
        "config": config,
        "params": {k: tolist(p) for k, p in attn.state_dict().items()},
        "inputs": [tolist(pick(x))],
        "output": tolist(pick(output)),
        "float64": tolist(pick(exact)),
        "steps": tolist(pick(steps)),
        "weights": tolist(weights),
    }


def write_case_dir(out, name, case):
    """DIR/<name>/: the case as a one-layer model for the attnrun command."""
    import numpy as np
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    layer = {"name": "l", "type": case["type"], **case["config"]}
    with open(os.path.join(d, "model.yaml"), "w") as f:
        f.write("name: %s\nlayers:\n  - %s\n" % (name.replace("_", "-"), json.dumps(layer)))
    np.savez(os.path.join(d, "weights.npz"),
             **{"l." + k: np.array(v, dtype=np.float32) for k, v in case["params"].items()})
    np.save(os.path.join(d, "input.npy"), np.array(case["inputs"][0], dtype=np.float32))
    np.save(os.path.join(d, "expected.npy"), np.array(case["output"], dtype=np.float32))
    np.save(os.path.join(d, "expected_float64.npy"), np.array(case["float64"], dtype=np.float32))


def main():
    global SEED_OFFSET
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0, help="shift every case's seed by 10000·SEED")
    ap.add_argument("--out", help="write frontier_layers.json and a directory per case here")
    args = ap.parse_args()
    SEED_OFFSET = 10000 * args.seed
    cases = {
        # The acceptance layer: d 32, 4 heads, gated_delta.
        "linear_gated_delta": linear_case(1, "gated_delta", 32, 4, 4, 8, 8, 4, (2, 7, 32)),
        # Grouped: 2 query/key heads serve 4 value heads; wider value heads.
        "linear_gated_delta_grouped": linear_case(2, "gated_delta", 32, 4, 2, 8, 12, 4, (1, 9, 32), unbatched=True),
        "linear_delta": linear_case(3, "delta", 32, 4, 2, 8, 8, 3, (2, 6, 32)),
        "linear_gated": linear_case(4, "gated", 32, 4, 4, 8, 8, 4, (2, 6, 32)),
        "linear_linear": linear_case(5, "linear", 32, 4, 4, 8, 8, 2, (2, 6, 32), qk_l2norm=False),
        # The acceptance layer.
        "mla": mla_case(11, 32, 4, 16, 8, 8, 4, 8, (2, 6, 32)),
        # q_proj instead of the q LoRA, rotate_half RoPE, biases, (T, d) input.
        "mla_q_proj_half_bias": mla_case(12, 32, 4, None, 8, 6, 6, 4, (1, 7, 32), interleave=False, bias=True, unbatched=True),
    }
    out = args.out or HERE
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "frontier_layers.json")
    with open(path, "w") as f:
        json.dump(cases, f, separators=(",", ":"))
        f.write("\n")
    if args.out:
        for name, case in cases.items():
            write_case_dir(out, name, case)
    print("wrote", path)


if __name__ == "__main__":
    main()
