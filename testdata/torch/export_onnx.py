#!/usr/bin/python3
"""Exports attnrun's PyTorch reference modules to ONNX, with test data.

Usage, from the repository root (Debian's python3-torch and python3-onnx):

    /usr/bin/python3 testdata/torch/export_onnx.py --out testdata/onnx
    /usr/bin/python3 testdata/torch/export_onnx.py --out /tmp/fresh --seed 4242 --opsets 17

For every case below and every opset, the module is exported twice with
torch.onnx.export: with static shapes, and with symbolic batch and sequence
axes (dynamic_axes). Each export is written as

    DIR/<case>_opset<N>_<static|dynamic>/model.onnx
    DIR/<case>_opset<N>_<static|dynamic>/test_data_set_0/input_K.pb, output_K.pb

(serialized onnx TensorProto, the ONNX backend-test layout). Dynamic exports
also get test_data_set_1, with another batch size and sequence length, so a
runtime that froze the example's shapes fails. DIR/manifest.json lists every
export: case, opset, module class, inputs and outputs with shapes, the ONNX
ops used, and the attnrun layers a lifter should turn the graph into.

The same seed gives the same weights and inputs for every opset and mode;
the committed fixtures under testdata/onnx use the default seed 0. Each
export is checked with onnx.checker (full check, including strict shape
inference) before it is written. The expected outputs are PyTorch's, from
the module in eval mode (dropout off).
"""

import argparse
import collections
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import warnings

import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import modules  # noqa: E402

# Small on purpose: the fixtures are committed. d <= 16, T <= 8.
D = 8
CONTEXT = 8
HEADS = 2
SHAPES = [(2, 6), (3, 4)]  # (batch, sequence) of test_data_set_0 and test_data_set_1


@dataclasses.dataclass
class Case:
    """One module to export: how to build it, feed it, and lift it back."""
    name: str
    build: callable        # () -> nn.Module, called right after torch.manual_seed(seed)
    inputs: callable       # (generator, batch, seq) -> {input name: tensor}
    outputs: list          # output names, in the module's return order
    axes: dict             # dynamic axes: {input or output name: {axis: symbol}}
    layers: list           # what a lifter should produce: model.yaml layers (formats.md)
    note: str = ""         # anything a lifter must know beyond the layers


def sequence(gen, batch, seq):
    return {"x": torch.randn(batch, seq, D, generator=gen)}


def cross(gen, batch, seq):
    # Memory is longer than the query, so the two sequence axes differ; the
    # first memory position is never padded, so no query sees only padding.
    memory_len = seq + 2
    padding = torch.rand(batch, memory_len, generator=gen) < 0.3
    padding[:, 0] = False
    return {"query": torch.randn(batch, seq, D, generator=gen),
            "memory": torch.randn(batch, memory_len, D, generator=gen),
            "key_padding_mask": padding}


BT = {0: "batch", 1: "seq"}
SEQUENCE_AXES = {"x": BT, "y": BT}


def layer(name, kind, **fields):
    return {"name": name, "type": kind, **fields}


def multihead(name, qkv_bias, **fields):
    return layer(name, "attention.multihead", d_in=D, d_out=D, context_length=CONTEXT,
                 num_heads=HEADS, dropout=0.0, qkv_bias=qkv_bias, out_bias=True, **fields)


CASES = [
    Case("causal_attention",
         lambda: modules.CausalAttention(D, D, CONTEXT, dropout=0.1, qkv_bias=True),
         sequence, ["y"], SEQUENCE_AXES,
         [layer("attn", "attention.causal", d_in=D, d_out=D, context_length=CONTEXT,
                dropout=0.1, qkv_bias=True)]),
    Case("multihead_wrapper",
         lambda: modules.MultiHeadWrapper(D, D // HEADS, CONTEXT, HEADS, dropout=0.1),
         sequence, ["y"], SEQUENCE_AXES,
         [layer("attn", "attention.multihead_wrapper", d_in=D, d_out=D // HEADS,
                context_length=CONTEXT, num_heads=HEADS, dropout=0.1)]),
    Case("multihead",
         lambda: modules.MultiHeadAttention(D, D, CONTEXT, HEADS, dropout=0.1),
         sequence, ["y"], SEQUENCE_AXES, [multihead("attn", False, causal=True)]),
    Case("self_attention_matrix",
         lambda: modules.SelfAttentionMatrix(D, D // 2),
         sequence, ["y"], SEQUENCE_AXES,
         [layer("attn", "attention.self", d_in=D, d_out=D // 2, weights="matrix")]),
    Case("positional_self_attention",
         lambda: modules.PositionalAttention(modules.SelfAttention(D, D), CONTEXT, D),
         sequence, ["y"], SEQUENCE_AXES,
         [layer("pos", "position.learned", context_length=CONTEXT, d=D),
          layer("attn", "attention.self", d_in=D, d_out=D)]),
    Case("causal_average", modules.CausalAverage, sequence, ["y"], SEQUENCE_AXES,
         [layer("avg", "attention.average")]),
    Case("torch_mha_causal_self",
         lambda: modules.TorchCausalSelfAttention(D, HEADS, CONTEXT),
         sequence, ["y", "weights"],
         {"x": BT, "y": BT, "weights": {0: "batch", 1: "seq", 2: "seq"}},
         [multihead("attn", True, causal=True)],
         "nn.MultiheadAttention's in_proj_weight/in_proj_bias are W_query, W_key, W_value "
         "stacked (rows 0:d, d:2d, 2d:3d). Output `weights` is the attention weights "
         "averaged over heads (need_weights=True)."),
    Case("torch_mha_cross",
         lambda: modules.TorchCrossAttention(D, HEADS), cross, ["y"],
         {"query": BT, "memory": {0: "batch", 1: "memory_seq"},
          "key_padding_mask": {0: "batch", 1: "memory_seq"}, "y": BT},
         [multihead("attn", True, causal=False, inputs=["query", "memory", "key_padding_mask"])],
         "Cross-attention: queries from `query`, keys and values from `memory`, memory "
         "positions where key_padding_mask is true get no weight. attention.multihead in "
         "formats.md has neither a memory input nor a key padding mask yet."),
    Case("transformer_block",
         lambda: modules.TransformerBlock(D, CONTEXT, HEADS, dropout=0.1),
         sequence, ["y"], SEQUENCE_AXES,
         [layer("norm1", "norm.layer", d=D, eps=1e-5, inputs=["x"]),
          multihead("attn", False, causal=True),
          layer("res1", "nn.add", inputs=["x", "attn"]),
          layer("norm2", "norm.layer", d=D, eps=1e-5),
          layer("fc1", "nn.linear", d_in=D, d_out=4 * D),
          layer("gelu", "activation.gelu", approximate="none"),
          layer("fc2", "nn.linear", d_in=4 * D, d_out=D),
          layer("res2", "nn.add", inputs=["res1", "fc2"])],
         "Pre-norm block; norm.layer (nn.LayerNorm: weight, bias) and activation.gelu "
         "(exact, erf) are not in formats.md yet. Opset 17 exports LayerNormalization, "
         "earlier opsets its ReduceMean/Sub/Pow/Sqrt/Div decomposition."),
]

# Layer types the manifest names that notes/formats.md does not define yet.
NOT_IN_FORMATS = ["norm.layer", "activation.gelu"]


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def write_test_data(folder, index, inputs, outputs, output_names):
    data = os.path.join(folder, f"test_data_set_{index}")
    os.mkdir(data)
    for k, (name, value) in enumerate(inputs.items()):
        write_tensor(os.path.join(data, f"input_{k}.pb"), value, name)
    for k, (name, value) in enumerate(zip(output_names, outputs)):
        write_tensor(os.path.join(data, f"output_{k}.pb"), value, name)


def write_tensor(path, value, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(value.detach().numpy(), name).SerializeToString())


def value_infos(values):
    """Inputs or outputs of a graph as {name, dtype, shape}; symbolic dims by name."""
    dtypes = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.BOOL: "bool",
              onnx.TensorProto.INT64: "int64"}
    return [{"name": v.name, "dtype": dtypes[v.type.tensor_type.elem_type],
             "shape": [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]}
            for v in values]


def export_case(case, seed, opset, dynamic, out_dir):
    """Exports one case at one opset, checks it, writes it; returns its manifest entry."""
    torch.manual_seed(seed)
    module = case.build().eval()
    gen = torch.Generator().manual_seed(seed)
    sets = [case.inputs(gen, b, t) for b, t in (SHAPES if dynamic else SHAPES[:1])]

    name = f"{case.name}_opset{opset}_{'dynamic' if dynamic else 'static'}"
    folder = os.path.join(out_dir, name)
    os.mkdir(folder)
    path = os.path.join(folder, "model.onnx")
    input_names = list(sets[0])
    with torch.no_grad():
        torch.onnx.export(module, tuple(sets[0].values()), path, opset_version=opset,
                          input_names=input_names, output_names=case.outputs,
                          dynamic_axes=case.axes if dynamic else None)
        for k, inputs in enumerate(sets):
            write_test_data(folder, k, inputs, as_tuple(module(*inputs.values())), case.outputs)

    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    ops = collections.Counter(n.op_type for n in model.graph.node)
    return {
        "name": name,
        "case": case.name,
        "opset": opset,
        "dynamic": dynamic,
        "module": f"modules.{type(module).__name__}",
        "inputs": value_infos(model.graph.input),
        "outputs": value_infos(model.graph.output),
        "test_data_sets": [{n: list(t.shape) for n, t in s.items()} for s in sets],
        "ops": dict(sorted(ops.items())),
        "layers": case.layers,
        "note": case.note,
    }


def check_torch_mha_lifts(seed):
    """Asserts the manifest's claim that nn.MultiheadAttention (causal, self) is
    attention.multihead with qkv_bias: same output, and `weights` is the mean
    of its heads' weights."""
    torch.manual_seed(seed)
    torch_mha = modules.TorchCausalSelfAttention(D, HEADS, CONTEXT).eval()
    ours = modules.MultiHeadAttention(D, D, CONTEXT, HEADS, qkv_bias=True).eval()
    mha = torch_mha.mha
    q, k, v = mha.in_proj_weight.chunk(3)
    qb, kb, vb = mha.in_proj_bias.chunk(3)
    ours.load_state_dict({
        "W_query.weight": q, "W_query.bias": qb, "W_key.weight": k, "W_key.bias": kb,
        "W_value.weight": v, "W_value.bias": vb,
        "out_proj.weight": mha.out_proj.weight, "out_proj.bias": mha.out_proj.bias})
    x = sequence(torch.Generator().manual_seed(seed), *SHAPES[0])["x"]
    with torch.no_grad():
        y, weights = torch_mha(x)
        ok = (torch.allclose(y, ours(x), rtol=1e-5, atol=1e-6)
              and torch.allclose(weights, ours.attention_weights.mean(dim=1), rtol=1e-5, atol=1e-6))
    if not ok:
        raise SystemExit("export_onnx.py: nn.MultiheadAttention does not match attention.multihead")


def write_manifest(path, seed, entries):
    """Writes manifest.json: a header, then one export per line (grep- and diff-friendly)."""
    header = {
        "generator": "testdata/torch/export_onnx.py",
        "seed": seed,
        "torch": torch.__version__,
        "onnx": onnx.__version__,
        "layer_types_not_in_formats": NOT_IN_FORMATS,
    }
    lines = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in header.items()]
    cases = ",\n".join(f"  {json.dumps(e)}" for e in entries)
    with open(path, "w") as f:
        f.write("{\n" + "\n".join(lines) + '\n "cases": [\n' + cases + "\n ]\n}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory to (re)create")
    parser.add_argument("--seed", type=int, default=0, help="weights and inputs seed (default 0)")
    parser.add_argument("--opsets", default="13,14,15,16,17", help="comma-separated opsets")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    args = parser.parse_args()

    # The modules' context_length guard is plain Python: the tracer evaluates
    # it once on the example and says so. The graphs still refuse longer
    # sequences: the sliced mask no longer fits the scores.
    warnings.filterwarnings("ignore", "Converting a tensor to a Python boolean",
                            torch.jit.TracerWarning)
    opsets = [int(o) for o in args.opsets.split(",")]
    wanted = set(args.cases.split(",")) if args.cases else {c.name for c in CASES}
    unknown = wanted - {c.name for c in CASES}
    if unknown:
        raise SystemExit(f"export_onnx.py: unknown cases {sorted(unknown)}; "
                         f"known: {[c.name for c in CASES]}")

    check_torch_mha_lifts(args.seed)

    # Write into a temp dir beside --out, then swap it in: a failed run
    # leaves the previous fixtures untouched.
    out = os.path.abspath(args.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".onnx-", dir=os.path.dirname(out))
    try:
        entries = []
        for case in (c for c in CASES if c.name in wanted):
            for opset in opsets:
                for dynamic in (False, True):
                    entry = export_case(case, args.seed, opset, dynamic, tmp)
                    entries.append(entry)
                    print(f"ok  {entry['name']:<42} {sum(entry['ops'].values()):3d} nodes")
        write_manifest(os.path.join(tmp, "manifest.json"), args.seed, entries)
        if os.path.exists(out):
            shutil.rmtree(out)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"wrote {len(entries)} exports to {out}")


if __name__ == "__main__":
    main()
