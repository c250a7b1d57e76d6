"""PyTorch goldens for models with typed (int64) inputs: embeddings, a tied LM head, pooling.

Run from the repository root with Debian's PyTorch 1.13:

    /usr/bin/python3 models/testdata/typed/gen.py

Two tiny models, written beside their attnrun configs (lm.yaml, encoder.yaml):

- lm: input_ids -> nn.Embedding (padding_idx 0) + OPT-style learned
  positions (offset 2) -> LayerNorm -> a head tied to the embedding
  (lm_head.weight is wte.weight) -> logits;
- encoder: input_ids, token_type_ids, attention_mask -> token + token-type
  embeddings + learned positions -> LayerNorm -> sentence-transformers' mean
  pooling over attention_mask -> F.normalize.

For each, goldens.json holds the state_dict torch.manual_seed(SEED) gives a
fresh module (what models.Init(SEED) must reproduce, the tied weight under
both names), a state_dict of other values (normal draws) with its inputs and
PyTorch's float32 output.
"""

import json
import os

import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 13
VOCAB, D, CONTEXT, OFFSET = 11, 8, 12, 2


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D, padding_idx=0)
        self.wpe = nn.Embedding(CONTEXT + OFFSET, D)
        self.ln = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[-1]) + OFFSET
        return self.lm_head(self.ln(self.wte(input_ids) + self.wpe(positions)))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D, padding_idx=0)
        self.wtt = nn.Embedding(2, D)
        self.wpe = nn.Embedding(CONTEXT, D)
        self.ln = nn.LayerNorm(D)

    def forward(self, input_ids, token_type_ids, attention_mask):
        h = self.wte(input_ids) + self.wtt(token_type_ids)
        h = self.ln(h + self.wpe(torch.arange(input_ids.shape[-1])))
        m = attention_mask.unsqueeze(-1).expand(h.size()).float()
        pooled = torch.sum(h * m, 1) / torch.clamp(m.sum(1), min=1e-9)
        return F.normalize(pooled, p=2, dim=1)


def state(module):
    return {k: v.tolist() for k, v in module.state_dict().items()}


def golden(make, inputs):
    torch.manual_seed(SEED)
    module = make()
    init = state(module)
    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for p in module.parameters():  # a tied weight is one parameter: drawn once
            p.normal_(generator=gen)
        out = module(*[torch.tensor(x) for x in inputs])
    return {"init": init, "params": state(module), "inputs": inputs, "output": out.tolist()}


def main():
    torch.set_num_threads(1)
    ids = [[3, 0, 7, 10, 1, 5, 2], [4, 4, 9, 6, 0, 8, 1]]
    goldens = {
        "generator": "models/testdata/typed/gen.py", "torch": torch.__version__, "seed": SEED,
        "lm": golden(LM, [ids]),
        "encoder": golden(Encoder, [[[5, 2, 9, 3, 0], [7, 1, 4, 0, 0]],
                                    [[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]],
                                    [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]]),
    }
    with open(os.path.join(HERE, "goldens.json"), "w") as f:
        json.dump(goldens, f)
        f.write("\n")


if __name__ == "__main__":
    main()
