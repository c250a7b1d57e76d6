"""PyTorch goldens for nn.moe: Hugging Face's own sparse MoE blocks.

Run from the repository root with the reference virtualenv (transformers 5,
whose experts are stacked gate_up_proj / down_proj tensors):

    ~/.cache/attnrun/venv/bin/python layers/testdata/moe_cases.py

Writes layers/testdata/moe_cases.json: per case the nn.moe config, the
block's state_dict (random normal weights, so that routing differs from
token to token), a (B, T, d) input and the block's float32 output, from
MixtralSparseMoeBlock (top-k renormalized) and Qwen2MoeSparseMoeBlock
(not renormalized; a shared expert gated by a sigmoid), with the eager
experts implementation (a loop over the experts hit). No case has tied
router probabilities: which of equal values torch.topk keeps on the CPU is
unspecified (it keeps [2, 3] of four equal ones), where nn.moe keeps the
lower indices, as ONNX's TopK does.
"""

import json
import os

import torch
import transformers
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock

HERE = os.path.dirname(os.path.abspath(__file__))


def case(block, config, seed, shape):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    x = torch.randn(shape, generator=gen)
    with torch.no_grad():
        y = block(x)
    if isinstance(y, tuple):
        y = y[0]
    return {
        "config": config,
        "params": {k: v.tolist() for k, v in block.state_dict().items()},
        "input": x.tolist(),
        "output": y.tolist(),
    }


def mixtral(d, hidden, experts, top_k, act="silu"):
    cfg = transformers.MixtralConfig(hidden_size=d, intermediate_size=hidden, num_local_experts=experts,
                                     num_experts_per_tok=top_k, hidden_act=act)
    cfg._experts_implementation = "eager"
    config = {"d": d, "d_hidden": hidden, "experts": experts, "top_k": top_k, "activation": act}
    return MixtralSparseMoeBlock(cfg).eval(), config


def qwen2_moe(d, hidden, shared, experts, top_k):
    cfg = transformers.Qwen2MoeConfig(hidden_size=d, moe_intermediate_size=hidden, num_experts=experts,
                                      num_experts_per_tok=top_k, shared_expert_intermediate_size=shared,
                                      norm_topk_prob=False)
    cfg._experts_implementation = "eager"
    config = {"d": d, "d_hidden": hidden, "experts": experts, "top_k": top_k, "renormalize": False,
              "shared_d_hidden": shared}
    return Qwen2MoeSparseMoeBlock(cfg).eval(), config


def main():
    torch.manual_seed(0)
    cases = {
        "mixtral": case(*mixtral(16, 24, 4, 2), seed=1, shape=(2, 5, 16)),
        "mixtral_top3_of_5_gelu": case(*mixtral(8, 12, 5, 3, act="gelu"), seed=2, shape=(3, 4, 8)),
        "qwen2_moe": case(*qwen2_moe(16, 12, 20, 4, 2), seed=4, shape=(2, 5, 16)),
    }
    with open(os.path.join(HERE, "moe_cases.json"), "w") as f:
        json.dump(cases, f)
        f.write("\n")


if __name__ == "__main__":
    main()
