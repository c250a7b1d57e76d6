"""PyTorch goldens for nn.embedding, position.learned's offset, pool.mean, nn.normalize and activation.softcap.

Run from the repository root with Debian's PyTorch 1.13 (or the reference
virtualenv's 2.15; both give these numbers):

    /usr/bin/python3 layers/testdata/embedding_cases.py

Writes layers/testdata/embedding_cases.json: per case the layer type and
config, the module's state_dict, the inputs (int64 ids written as numbers)
and PyTorch's float32 output, and for nn.embedding the weights
torch.manual_seed(seed) gives a fresh module (the padding row zeroed), which
a model's Init(seed) must reproduce. The model-level goldens (a tied head,
typed inputs) are in models/testdata/typed_inputs.py.
"""

import json
import os

import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


def ids(gen, high, *shape):
    return torch.randint(0, high, shape, generator=gen)


def embedding_case(seed, num, dim, padding_idx, shape):
    torch.manual_seed(seed)
    module = nn.Embedding(num, dim, padding_idx=padding_idx)
    init = module.weight.detach().clone()
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        module.weight.normal_(generator=gen)  # the padding row too: forward reads it as any other
    x = ids(gen, num, *shape)
    if padding_idx is not None:
        x.view(-1)[0] = padding_idx % num
    config = {"num_embeddings": num, "embedding_dim": dim}
    if padding_idx is not None:
        config["padding_idx"] = padding_idx
    return {"type": "nn.embedding", "config": config, "seed": seed, "init": init.tolist(),
            "params": {"weight": module.weight.tolist()}, "inputs": [x.tolist()],
            "output": module(x).tolist()}


def offset_position_case(seed, positions, offset, dim, batch, tokens, with_ids):
    """OPT's learned positions: an nn.Embedding of positions + offset rows,
    looked up at position_ids + offset (arange when position_ids is absent),
    added to the token embeddings."""
    gen = torch.Generator().manual_seed(seed)
    table = nn.Embedding(positions + offset, dim)
    with torch.no_grad():
        table.weight.normal_(generator=gen)
    x = torch.randn(batch, tokens, dim, generator=gen)
    if with_ids:
        # OPT's position_ids for left padding: cumsum(mask) * mask - 1.
        mask = torch.ones(batch, tokens, dtype=torch.int64)
        mask[0, :2] = 0
        pos = torch.cumsum(mask, dim=1) * mask - 1
        inputs = [x.tolist(), pos.tolist()]
    else:
        pos = torch.arange(tokens).expand(batch, tokens)
        inputs = [x.tolist()]
    out = x + table(pos + offset)
    config = {"context_length": positions, "d": dim, "offset": offset}
    return {"type": "position.learned", "config": config, "params": {"weight": table.weight.tolist()},
            "inputs": inputs, "output": out.tolist()}


def mean_pool_case(seed, lengths, tokens, dim, mask_dtype):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), tokens, dim, generator=gen)
    mask = (torch.arange(tokens).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).to(mask_dtype)
    # sentence-transformers' Pooling, pooling_mode_mean_tokens.
    m = mask.unsqueeze(-1).expand(x.size()).float()
    out = torch.sum(x * m, 1) / torch.clamp(m.sum(1), min=1e-9)
    return {"type": "pool.mean", "config": {}, "params": {}, "inputs": [x.tolist(), mask.tolist()],
            "output": out.tolist(), "mask_dtype": str(mask_dtype).replace("torch.", "")}


def normalize_case(seed, shape, zero_row):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=gen) * 3
    if zero_row:
        x.view(-1, shape[-1])[1] = 0
    return {"type": "nn.normalize", "config": {}, "params": {}, "inputs": [x.tolist()],
            "output": F.normalize(x, p=2, dim=-1).tolist()}


def scaled_embedding_case(seed):
    """Gemma's embeddings: the rows times its float32 normalizer √d."""
    case = embedding_case(seed, 9, 16, None, (2, 3))
    module = nn.Embedding(9, 16)
    with torch.no_grad():
        module.weight.copy_(torch.tensor(case["params"]["weight"]))
    x = torch.tensor(case["inputs"][0])
    normalizer = torch.tensor(16 ** 0.5, dtype=torch.float32)
    case["config"]["scale"] = float(normalizer)
    case["output"] = (module(x) * normalizer).tolist()
    return case


def softcap_case(seed, cap):
    """Gemma 2's final logit softcapping: tanh(x / cap) * cap."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 7, generator=gen) * 4
    return {"type": "activation.softcap", "config": {"cap": cap}, "params": {}, "inputs": [x.tolist()],
            "output": (torch.tanh(x / cap) * cap).tolist()}


def main():
    torch.set_num_threads(1)
    cases = {
        "embedding_padding": embedding_case(3, 11, 6, 0, (2, 5)),
        "embedding_negative_padding": embedding_case(4, 7, 5, -1, (4,)),
        "embedding_no_padding": embedding_case(5, 9, 4, None, (3, 2)),
        "position_offset_arange": offset_position_case(6, 8, 2, 6, 2, 5, False),
        "position_offset_ids": offset_position_case(7, 8, 2, 6, 2, 5, True),
        "mean_pool_int64": mean_pool_case(8, [5, 3, 1], 5, 6, torch.int64),
        "mean_pool_float": mean_pool_case(9, [4, 0], 4, 3, torch.float32),
        "normalize_2d": normalize_case(10, (3, 7), True),
        "normalize_3d": normalize_case(11, (2, 3, 5), False),
        "embedding_scaled": scaled_embedding_case(12),
        "softcap": softcap_case(13, 2.0),
    }
    with open(os.path.join(HERE, "embedding_cases.json"), "w") as f:
        json.dump({"generator": "layers/testdata/embedding_cases.py", "torch": torch.__version__,
                   "cases": cases}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
