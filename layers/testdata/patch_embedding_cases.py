"""PyTorch goldens for nn.patch_embedding (ViT's embeddings).

Run from the repository root with Debian's PyTorch 1.13 (or the reference
virtualenv's 2.15):

    /usr/bin/python3 layers/testdata/patch_embedding_cases.py

Writes layers/testdata/patch_embedding_cases.json: per case the config, the
parameters under the layer's names (Hugging Face's below
ViTModel.embeddings), the images and PyTorch's output: Conv2d with stride =
kernel, flatten(2).transpose(1, 2), the CLS token expanded to the batch
and concatenated in front, then the positions added, as ViTEmbeddings
computes it in eval mode. Every parameter is drawn N(0, 1) (a nonzero
bias, CLS token and positions), so that each one shows in the output.
"""

import json
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def case(seed, channels, image_size, patch_size, d_out, cls_token, positions, batch):
    gen = torch.Generator().manual_seed(seed)
    grid = image_size // patch_size
    tokens = grid * grid + (1 if cls_token else 0)
    params = {"patch_embeddings.projection.weight": torch.randn(d_out, channels, patch_size, patch_size, generator=gen),
              "patch_embeddings.projection.bias": torch.randn(d_out, generator=gen)}
    if cls_token:
        params["cls_token"] = torch.randn(1, 1, d_out, generator=gen)
    if positions:
        params["position_embeddings"] = torch.randn(1, tokens, d_out, generator=gen)
    images = torch.randn(batch, channels, image_size, image_size, generator=gen)
    x = F.conv2d(images, params["patch_embeddings.projection.weight"], params["patch_embeddings.projection.bias"],
                 stride=patch_size).flatten(2).transpose(1, 2)
    if cls_token:
        x = torch.cat([params["cls_token"].expand(batch, -1, -1), x], dim=1)
    if positions:
        x = x + params["position_embeddings"]
    config = {"channels": channels, "image_size": image_size, "patch_size": patch_size, "d_out": d_out,
              "cls_token": cls_token, "positions": positions}
    return {"config": config, "params": {k: v.tolist() for k, v in params.items()},
            "input": images.tolist(), "output": x.tolist()}


def main():
    cases = {
        "vit": case(1, 3, 8, 4, 6, True, True, 2),
        "plain": case(2, 2, 6, 3, 5, False, False, 3),
        "positions_only": case(3, 1, 4, 2, 4, False, True, 1),
    }
    with open(os.path.join(HERE, "patch_embedding_cases.json"), "w") as f:
        json.dump(cases, f)


if __name__ == "__main__":
    main()
