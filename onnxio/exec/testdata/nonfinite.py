"""Writes small ONNX models whose inputs hold NaN, +Inf or -Inf, for ONNX
Runtime to run (testdata/ort/run_cases.mjs writes its outputs) and the
executor to be checked against (nonfinite_test.go).

  softmax*      Softmax (opset 13, last axis; opset 11, coerced to 2-D) on
                rows with NaN, +Inf, -Inf, all -Inf, at lengths that reach
                the vector kernels' bodies and tails
  chain*        the attention chain the executor fuses: MatMul(Q, Kt), Div,
                Where(causal, -inf, S) or Add(S, Where(causal, -inf, 0)),
                Softmax, MatMul(V); 70 queries span two of the fused
                kernel's query blocks
  attn23_*      the Attention operator: is_causal, bool and float masks,
                a fully masked query, past_key
  attn24_*      nonpad_kv_seqlen, with NaN in the padding

Each batch entry of a model poisons one element of Q, K or V with NaN, +Inf
or -Inf, at a row that every query sees, or one that the causal frontier or
the mask hides from some queries.

Usage (Debian's python3-onnx 1.12; the Attention models are built with
onnx.helper and the opset stamped by hand, as testdata/ort/attention_cases.py
does), from the repository root:

    /usr/bin/python3 onnxio/exec/testdata/nonfinite.py
    node testdata/ort/run_cases.mjs onnxio/exec/testdata/nonfinite ~/.cache/attnrun/ort

The first replaces onnxio/exec/testdata/nonfinite; re-running both leaves
git clean.
"""

import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "nonfinite")
NAN, INF = np.float32(np.nan), np.float32(np.inf)
POISONS = {"nan": NAN, "inf": INF, "-inf": -INF}
F32 = TensorProto.FLOAT


def write(name, nodes, inputs, outputs, opset, ir_version, initializers=()):
    """Writes OUT/name/model.onnx and its inputs; inputs are (name, array)."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, numpy_helper.from_array(a).data_type, a.shape) for n, a in inputs],
        [helper.make_tensor_value_info(o, F32, None) for o in outputs],
        initializer=[numpy_helper.from_array(a, n) for n, a in initializers])
    model = helper.make_model(graph, producer_name="attnrun onnxio/exec/testdata/nonfinite.py",
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    data = os.path.join(OUT, name, "test_data_set_0")
    os.makedirs(data)
    with open(os.path.join(OUT, name, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for k, (n, a) in enumerate(inputs):
        with open(os.path.join(data, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())


def softmax_cases():
    """One model per row length; each row of x is one case."""
    rng = np.random.default_rng(1)
    short = [[NAN, 1], [INF, 1], [-INF, 1], [-INF, -INF], [INF, INF], [1, 2]]
    write("softmax13_short", [helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
          [("x", np.array(short, dtype=np.float32))], ["y"], 13, 8)
    for n in (17, 40):
        rows = [np.full(n, -INF, dtype=np.float32), rng.standard_normal(n).astype(np.float32)]
        for at in (0, n // 2, n - 1):
            for v in POISONS.values():
                row = rng.standard_normal(n).astype(np.float32)
                row[at] = v
                rows.append(row)
        write(f"softmax13_n{n}", [helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
              [("x", np.stack(rows))], ["y"], 13, 8)
    x = np.array([[NAN, 1, 2], [-INF, 0, 1], [-INF, -INF, -INF], [INF, 0, 1]], dtype=np.float32).reshape(2, 2, 3)
    write("softmax11_coerced", [helper.make_node("Softmax", ["x"], ["y"], axis=1)], [("x", x)], ["y"], 11, 6)


def poisoned_batch(base, operand, rows, index):
    """base's arrays repeated along the batch axis, one entry per (row,
    poison): entry e has operand[e, index..., row, column] set to the poison.
    The other operands are repeated unchanged."""
    combos = [(row, v) for row in rows for v in POISONS.values()]
    out = {n: np.repeat(a, len(combos), axis=0) for n, a in base.items()}
    for e, (row, v) in enumerate(combos):
        out[operand][(e,) + index(row)] = v
    return out


def chain_cases():
    """The attention chain of a PyTorch export on (B, 2, T, d) heads, the
    causal mask computed in the graph from Q's length as an exporter does.
    Each batch entry poisons one element of Q, K or V."""
    rng = np.random.default_rng(2)
    mask_nodes = [
        helper.make_node("Shape", ["Q"], ["q_shape"]),
        helper.make_node("Gather", ["q_shape", "two"], ["t"]),
        helper.make_node("Range", ["zero", "t", "one"], ["positions"]),
        helper.make_node("Unsqueeze", ["positions", "axis1"], ["query_pos"]),
        helper.make_node("Unsqueeze", ["positions", "axis0"], ["key_pos"]),
        helper.make_node("Greater", ["key_pos", "query_pos"], ["causal"]),
    ]
    mask_inits = [("two", np.array(2, dtype=np.int64)), ("zero", np.array(0, dtype=np.int64)),
                  ("one", np.array(1, dtype=np.int64)), ("axis0", np.array([0], dtype=np.int64)),
                  ("axis1", np.array([1], dtype=np.int64)), ("neg_inf", np.array(-INF, dtype=np.float32))]
    masks = {
        "where": (mask_nodes + [helper.make_node("Where", ["causal", "neg_inf", "scaled"], ["masked"])], mask_inits),
        "add": (mask_nodes + [helper.make_node("Where", ["causal", "neg_inf", "zero_f"], ["bias"]),
                              helper.make_node("Add", ["scaled", "bias"], ["masked"])],
                mask_inits + [("zero_f", np.array(0, dtype=np.float32))]),
        "none": ([], []),
    }
    for t, d in ((5, 4), (70, 2)):
        base = {n: rng.standard_normal((1, 2, t, d)).astype(np.float32) for n in "QKV"}
        for mname, (mnodes, inits) in masks.items():
            if t > 5 and mname == "none":
                continue
            nodes = [
                helper.make_node("Transpose", ["K"], ["Kt"], perm=[0, 1, 3, 2]),
                helper.make_node("MatMul", ["Q", "Kt"], ["scores"]),
                helper.make_node("Div", ["scores", "sqrt_d"], ["scaled"]),
            ] + mnodes + [
                helper.make_node("Softmax", ["masked" if mnodes else "scaled"], ["weights"], axis=-1),
                helper.make_node("MatMul", ["weights", "V"], ["Y"]),
            ]
            inits = inits + [("sqrt_d", np.array(2, dtype=np.float32))]
            for operand in "QKV":
                x = poisoned_batch(base, operand, (0, t // 2, t - 1), lambda row: (1, row, 1))
                write(f"chain{t}_{mname}_{operand}", nodes, [(n, x[n]) for n in "QKV"], ["Y"], 17, 8, inits)


def attention(name, opset, attrs, x, mask=None, nonpad=None):
    names = ["Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"]
    arrays = [x["Q"], x["K"], x["V"], mask, x.get("past_key"), x.get("past_value"), nonpad]
    node_inputs = [n if a is not None else "" for n, a in zip(names, arrays)]
    while node_inputs[-1] == "":
        node_inputs.pop()
    # ONNX Runtime wants the present cache with a past one.
    outputs = ["Y", "present_key", "present_value"] if "past_key" in x else ["Y"]
    node = helper.make_node("Attention", node_inputs, outputs, **attrs)
    write(name, [node], [(n, a) for n, a in zip(names, arrays) if a is not None], outputs, opset,
          {23: 11, 24: 12}[opset])


def without_sentinel_rows(x, visible):
    """x without the batch entries where a query's visible scores are all
    -Inf while the causal frontier or a bool mask hides other keys from it.
    ONNX Runtime 1.30 adds the lowest float32 rather than -Inf for those
    (see testdata/ort/README.md), so such a query attends to the hidden
    keys there, where the specification and the executor give NaN."""
    with np.errstate(all="ignore"):
        scores = x["Q"] @ x["K"].transpose(0, 1, 3, 2)
    sentinel = (~visible).any(axis=-1) & np.where(visible, scores == -INF, True).all(axis=-1) & visible.any(axis=-1)
    keep = ~sentinel.any(axis=(1, 2))
    return {n: a[keep] for n, a in x.items()}


def attention_cases():
    """Attention on (B, 2, 5, 4) heads; each batch entry poisons one element
    of Q, K or V at a row every query sees (0), one the mask hides from
    every query (3) or the causal frontier from most (4)."""
    rng = np.random.default_rng(3)
    base = {n: rng.standard_normal((1, 2, 5, 4)).astype(np.float32) for n in "QKV"}
    keep = np.ones((5, 5), dtype=bool)
    keep[1, :] = False  # query 1 sees nothing
    keep[:, 3] = False  # key 3 is hidden from every query
    additive = np.where(keep, np.float32(0), -INF).astype(np.float32)
    variants = {
        "plain": ({}, None),
        "causal": ({"is_causal": 1}, None),
        "bool": ({}, keep),
        "float": ({}, additive),
        "causal_bool": ({"is_causal": 1}, keep),
    }
    for vname, (attrs, mask) in variants.items():
        visible = np.ones((5, 5), dtype=bool)
        if attrs.get("is_causal"):
            visible &= np.tril(visible)
        if mask is not None and mask.dtype == bool:
            visible &= mask
        for operand in "QKV":
            x = poisoned_batch(base, operand, (0, 3, 4), lambda row: (1, row, 2))
            attention(f"attn23_{vname}_{operand}", 23, attrs, without_sentinel_rows(x, visible), mask=mask)
    # A past of 3 keys and 2 new queries, causal: query 0 sees keys 0..3.
    base = {"Q": rng.standard_normal((1, 2, 2, 4)).astype(np.float32),
            "K": rng.standard_normal((1, 2, 2, 4)).astype(np.float32),
            "V": rng.standard_normal((1, 2, 2, 4)).astype(np.float32),
            "past_key": rng.standard_normal((1, 2, 3, 4)).astype(np.float32),
            "past_value": rng.standard_normal((1, 2, 3, 4)).astype(np.float32)}
    for operand in ("K", "V", "past_value"):
        x = poisoned_batch(base, operand, (0, 1), lambda row: (0, row, 1))
        attention(f"attn23_past_causal_{operand}", 23, {"is_causal": 1}, x)
    # nonpad_kv_seqlen: 3 real keys of 5; rows 3 and 4 are padding.
    base = {n: rng.standard_normal((1, 2, 5, 4)).astype(np.float32) for n in "QKV"}
    for causal in (0, 1):
        for operand in "KV":
            x = poisoned_batch(base, operand, (1, 4), lambda row: (0, row, 1))
            nonpad = np.full(len(x["Q"]), 3, dtype=np.int64)
            attention(f"attn24_nonpad{'_causal' if causal else ''}_{operand}", 24, {"is_causal": causal}, x,
                      nonpad=nonpad)


def main():
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    softmax_cases()
    chain_cases()
    attention_cases()
    print(f"{len(os.listdir(OUT))} cases in {OUT}")


if __name__ == "__main__":
    main()
