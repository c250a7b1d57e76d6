"""Exports a tiny Hugging Face Phi-3 (fused qkv_proj and gate_up_proj) with
both PyTorch 2.x exporters, for the lifting tests: a Slice or Split of a
Linear's output features is a Linear of its own.

Phi-3 computes its queries, keys and values as one qkv_proj sliced on the
last axis, and its MLP's gate and up projections as one gate_up_proj split
in halves (gate_up.chunk(2, dim=-1)): the TorchScript exporter writes
Slices (the MLP's bounds computed from the output width), the dynamo
exporter a Split. Its rotary embedding rotates q[..., :rotary_dim] and
concatenates the (empty) rest.

Usage, from the repository root (the reference virtualenv,
scripts/install-reference-tools.sh):

    ~/.cache/attnrun/venv/bin/python onnxio/lift/testdata/export_fused_projections.py

writes onnxio/lift/testdata/fused_projections_{ts17,dynamo18}/model.onnx
(inputs input_ids and attention_mask (batch, sequence), output logits) with
test_data_set_0 (PyTorch's logits, batch 2 of 5 tokens, the second row
left-padded by 2) and test_data_set_1 (batch 1 of 3 tokens).
"""

import os
import shutil
import warnings

import onnx
import torch
import transformers
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = 16


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


def build():
    torch.manual_seed(0)
    cfg = transformers.Phi3Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  num_key_value_heads=1, intermediate_size=24, max_position_embeddings=16,
                                  initializer_range=0.05, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                  attn_implementation="sdpa")
    return Logits(transformers.Phi3ForCausalLM(cfg).eval()).eval()


def data_sets():
    gen = torch.Generator().manual_seed(1)
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    return [(torch.randint(0, VOCAB, (2, 5), generator=gen), mask),
            (torch.randint(0, VOCAB, (1, 3), generator=gen), torch.ones(1, 3, dtype=torch.int64))]


def main():
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    model = build()
    sets = data_sets()
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "logits": {0: "batch", 1: "sequence"}}
    for key in ("ts17", "dynamo18"):
        out = os.path.join(HERE, f"fused_projections_{key}")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        path = os.path.join(out, "model.onnx")
        names = ["input_ids", "attention_mask"]
        if key == "ts17":
            torch.onnx.export(model, sets[0], path, dynamo=False, opset_version=17, input_names=names,
                              output_names=["logits"], dynamic_axes=axes)
        else:
            b, t = torch.export.Dim("batch"), torch.export.Dim("sequence")
            torch.onnx.export(model, sets[0], path, dynamo=True, opset_version=18, input_names=names,
                              output_names=["logits"], dynamic_shapes=({0: b, 1: t}, {0: b, 1: t}),
                              external_data=False)
            m = onnx.load(path)  # drop the stack traces: they name files on this machine
            for n in m.graph.node:
                kept = [p for p in n.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
                del n.metadata_props[:]
                n.metadata_props.extend(kept)
            onnx.save(m, path)
        m = onnx.load(path)
        onnx.checker.check_model(m)
        ops = {n.op_type for n in m.graph.node}
        assert ("Split" if key == "dynamo18" else "Slice") in ops, f"{key}: the fused projections are not cut as expected"
        for k, (ids, mask) in enumerate(sets):
            with torch.no_grad():
                logits = model(ids, mask)
            folder = os.path.join(out, f"test_data_set_{k}")
            os.makedirs(folder)
            for kind, i, name, t in (("input", 0, "input_ids", ids), ("input", 1, "attention_mask", mask),
                                     ("output", 0, "logits", logits)):
                with open(os.path.join(folder, f"{kind}_{i}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(t.numpy(), name).SerializeToString())


if __name__ == "__main__":
    main()
