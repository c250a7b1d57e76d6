"""PyTorch's greedy decoding of decoder.yaml's model: the golden for `attnrun generate` on attnrun layers.

Run from the repository root with Debian's PyTorch 1.13:

    /usr/bin/python3 testdata/generate/gen_layers.py

The module is decoder.yaml written in PyTorch (parameters under the same
names, lm_head.weight tied to wte.weight), its weights drawn from a seeded
generator. Greedy decoding recomputes the whole sequence at every step (no
cache) and appends the argmax of the last position's logits; layers.json
holds the state_dict, the prompts, the new ids and each step's logits.
"""

import json
import math
import os

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB, D, HEADS, CONTEXT, OFFSET = 13, 8, 2, 24, 2
PROMPTS = [[3, 7], [1], [5, 9, 2, 11, 4]]
NEW_TOKENS = 12


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(D, D)
        self.k_proj = nn.Linear(D, D)
        self.v_proj = nn.Linear(D, D)
        self.out_proj = nn.Linear(D, D)

    def forward(self, x):
        b, t, _ = x.shape
        hd = D // HEADS
        q, k, v = (p(x).view(b, t, HEADS, hd).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        scores = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return self.out_proj(y.transpose(1, 2).reshape(b, t, D))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D, padding_idx=0)
        self.wpe = nn.Embedding(CONTEXT + OFFSET, D)
        self.ln_1 = nn.LayerNorm(D)
        self.attn = Attention()
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids):
        h = self.wte(ids) + self.wpe(torch.arange(ids.shape[-1]) + OFFSET)
        h = h + self.attn(self.ln_1(h))
        return self.lm_head(self.ln_f(h))


def main():
    torch.set_num_threads(1)
    model = Decoder().eval()
    gen = torch.Generator().manual_seed(21)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(generator=gen)
            if name.startswith("ln"):  # norms near 1 and 0, as trained ones are
                p.mul_(0.1).add_(1.0 if name.endswith("weight") else 0.0)
            elif name.startswith("w"):  # small tables keep the logits' float32 rounding under 1e-6
                p.mul_(0.25)
            else:
                p.mul_(0.7)
    runs = []
    for prompt in PROMPTS:
        ids = torch.tensor([prompt])
        new, logits = [], []
        with torch.no_grad():
            for _ in range(NEW_TOKENS):
                last = model(ids)[0, -1]
                nxt = int(torch.argmax(last))
                new.append(nxt)
                logits.append(last.tolist())
                ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
        runs.append({"prompt": prompt, "new_ids": new, "logits": logits})
        print(prompt, "->", new)
    out = {"generator": "testdata/generate/gen_layers.py", "torch": torch.__version__, "config": "decoder.yaml",
           "max_new_tokens": NEW_TOKENS,
           "params": {k: v.tolist() for k, v in model.state_dict().items()}, "runs": runs}
    with open(os.path.join(HERE, "layers.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
