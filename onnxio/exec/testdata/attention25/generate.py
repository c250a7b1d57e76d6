"""Writes the opset-25 Attention cases (sliding windows) that
ops_attention_window_test.go runs: one folder per case with model.onnx and
test_data_set_0, and manifest.json.

The expected outputs are ONNX's reference implementation of Attention-25
(onnx.reference.ReferenceEvaluator, onnx 1.23.2), run on a float64 copy of
each model so that the float32 executor is compared with exact numbers.
Each case is also computed by `transcribed` below, the operator written out
from the specification's text in Operators.md (window: a query at position
p = offset + i sees key j iff p - left <= j <= p + right, each bound
nonnegative or -1 for none), and the two must agree before anything is
written.

Run with the reference tools' Python (scripts/install-reference-tools.sh):

    ~/.cache/attnrun/venv/bin/python onnxio/exec/testdata/attention25/generate.py
"""

import json
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 25
OPSET = 25


def case(name, covers, *, b=1, hq=2, hkv=2, sq=4, skv=4, past=0, d=4, dv=4,
         rank3=False, causal=False, left=None, right=None, mask=None,
         bool_mask=False, mask_neginf=0.0, nonpad=None, softcap=0.0,
         scale=None, mode=None, present=False, q_spread=1.0, nan_key=None):
    return dict(name=name, covers=covers, b=b, hq=hq, hkv=hkv, sq=sq, skv=skv,
                past=past, d=d, dv=dv, rank3=rank3, causal=causal, left=left,
                right=right, mask=mask, bool_mask=bool_mask,
                mask_neginf=mask_neginf, nonpad=nonpad, softcap=softcap,
                scale=scale, mode=mode, present=present, q_spread=q_spread,
                nan_key=nan_key)


CASES = [
    case("causal_left2", "is_causal with left_window_size 2 (Mistral's window of 3)",
         sq=6, skv=6, causal=True, left=2),
    case("left1_right0_not_causal", "left 1 and right 0 without is_causal: the window alone is causal",
         b=2, sq=5, skv=5, left=1, right=0),
    case("bidirectional_2_1", "the specification's example: left 2, right 1, 4 queries on 6 keys",
         sq=4, skv=6, left=2, right=1),
    case("right_only_3d_gqa", "right 1 alone, 3-D inputs, 4 query heads on 2 KV heads",
         rank3=True, hq=4, hkv=2, sq=5, skv=5, right=1),
    case("zero_zero_mode3", "left 0 and right 0: each query sees its own key; mode-3 weights",
         sq=4, skv=4, left=0, right=0, mode=3),
    case("past_causal_left3_present", "past_key of 4, causal, left 3: the window starts at the past's offset",
         b=2, hq=4, hkv=2, sq=3, skv=3, past=4, causal=True, left=3, present=True),
    case("decode_3d_left2_mode2", "one query after 6 cached keys, causal, left 2; mode-2 scores",
         rank3=True, hkv=1, sq=1, skv=1, past=6, causal=True, left=2, right=0, mode=2),
    case("short_queries_top_left", "2 queries on 6 keys without a cache: offset 0, top-left",
         sq=2, skv=6, left=1, right=2),
    case("float_mask_softcap_mode1", "a float mask with -Inf, softcap, causal, left 2; mode-1 scores",
         b=2, sq=5, skv=5, causal=True, left=2, mask=[2, 1, 5, 5], mask_neginf=0.2,
         softcap=2.0, q_spread=3.0, mode=1),
    case("bool_mask_fully_masked_mode3", "a bool mask and a window of 0 leave some queries no key: zeros",
         sq=5, skv=5, left=0, right=0, mask=[5, 5], bool_mask=True, mode=3),
    case("nonpad_causal_left2", "nonpad_kv_seqlen: the window's offset is nonpad - q_len per batch",
         b=3, sq=3, skv=7, nonpad=[7, 4, 2], causal=True, left=2),
    case("nonpad_bidirectional_mode3", "nonpad_kv_seqlen with a bidirectional window; mode-3 weights",
         b=2, hkv=1, sq=3, skv=7, nonpad=[6, 3], left=1, right=1, mode=3),
    case("scale_mode0_short_mask", "explicit scale, a mask shorter than the keys, causal, left 1; mode-0 scores",
         sq=4, skv=4, causal=True, left=1, mask=[4, 3], scale=0.4, mode=0),
    case("wider_than_keys", "a window wider than the keys hides nothing",
         sq=4, skv=4, causal=True, left=3, right=5, mode=3),
    case("nan_key_behind_window", "a NaN key the window hides: added -Inf leaves the row NaN",
         sq=5, skv=5, causal=True, left=1, nan_key=(0, 0)),
    case("long_gqa_fused", "64 queries, 8 query heads on 2 KV heads, causal, left 15",
         hq=8, hkv=2, sq=64, skv=64, d=16, dv=16, causal=True, left=15),
]


def draw(c, rng):
    """The case's inputs, float32 (bool and int64 where the op says)."""
    def normal(shape, spread=1.0):
        return (rng.standard_normal(shape) * spread).astype(np.float32)
    if c["rank3"]:
        q = normal((c["b"], c["sq"], c["hq"] * c["d"]), c["q_spread"])
        k = normal((c["b"], c["skv"], c["hkv"] * c["d"]))
        v = normal((c["b"], c["skv"], c["hkv"] * c["dv"]))
    else:
        q = normal((c["b"], c["hq"], c["sq"], c["d"]), c["q_spread"])
        k = normal((c["b"], c["hkv"], c["skv"], c["d"]))
        v = normal((c["b"], c["hkv"], c["skv"], c["dv"]))
    if c["nan_key"] is not None:
        batch, key = c["nan_key"]
        if c["rank3"]:
            k[batch, key, :] = np.nan
        else:
            k[batch, :, key, :] = np.nan
    inputs = {"Q": q, "K": k, "V": v}
    if c["mask"] is not None:
        if c["bool_mask"]:
            inputs["attn_mask"] = rng.random(c["mask"]) < 0.7
        else:
            m = normal(c["mask"])
            m[rng.random(c["mask"]) < c["mask_neginf"]] = -np.inf
            inputs["attn_mask"] = m
    if c["past"]:
        inputs["past_key"] = normal((c["b"], c["hkv"], c["past"], c["d"]))
        inputs["past_value"] = normal((c["b"], c["hkv"], c["past"], c["dv"]))
    if c["nonpad"] is not None:
        inputs["nonpad_kv_seqlen"] = np.array(c["nonpad"], dtype=np.int64)
    return inputs


def build(c, inputs, elem):
    """The one-node model of a case, its float inputs of type elem."""
    names = ["Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"]
    node_in = [n if n in inputs else "" for n in names]
    while node_in[-1] == "":
        node_in.pop()
    outs = ["Y", "", "", ""]
    if c["present"]:
        outs[1:3] = ["present_key", "present_value"]
    if c["mode"] is not None:
        outs[3] = "qk_matmul_output"
    while outs[-1] == "":
        outs.pop()
    attrs = {}
    if c["rank3"]:
        attrs.update(q_num_heads=c["hq"], kv_num_heads=c["hkv"])
    if c["causal"]:
        attrs["is_causal"] = 1
    if c["left"] is not None:
        attrs["left_window_size"] = c["left"]
    if c["right"] is not None:
        attrs["right_window_size"] = c["right"]
    if c["softcap"]:
        attrs["softcap"] = c["softcap"]
    if c["scale"] is not None:
        attrs["scale"] = c["scale"]
    if c["mode"] is not None:
        attrs["qk_matmul_output_mode"] = c["mode"]
    node = helper.make_node("Attention", node_in, outs, **attrs)

    def info(name, x):
        t = elem if x.dtype == np.float32 else helper.np_dtype_to_tensor_dtype(x.dtype)
        return helper.make_tensor_value_info(name, t, list(x.shape))
    graph = helper.make_graph(
        [node], c["name"], [info(n, inputs[n]) for n in names if n in inputs],
        [helper.make_tensor_value_info(o, elem, None) for o in outs if o])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=11)
    # Let ONNX's shape inference type the outputs (and check the node).
    return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


def transcribed(c, x):
    """Attention-25 in float64 as Operators.md describes it, for 4-D or
    3-D inputs: (Y, present_key, present_value, qk_matmul_output)."""
    q, k, v = (x[n].astype(np.float64) for n in "QKV")
    b = q.shape[0]
    if c["rank3"]:
        def heads(t, h):
            return t.reshape(b, t.shape[1], h, -1).transpose(0, 2, 1, 3)
        q, k, v = heads(q, c["hq"]), heads(k, c["hkv"]), heads(v, c["hkv"])
    if c["past"]:
        k = np.concatenate([x["past_key"].astype(np.float64), k], axis=2)
        v = np.concatenate([x["past_value"].astype(np.float64), v], axis=2)
    present_k, present_v = k, v
    sq, total = q.shape[2], k.shape[2]
    group = c["hq"] // c["hkv"]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    # Q and K are each multiplied by sqrt(scale): of the float32 attribute
    # in float32, as ONNX's reference takes its square root, or of the
    # default 1/sqrt(head_size).
    if c["scale"] is not None:
        root = float(np.sqrt(np.float32(c["scale"])))
    else:
        root = np.sqrt(1 / np.sqrt(q.shape[3]))
    raw = (q * root) @ (k * root).transpose(0, 1, 3, 2)
    capped = c["softcap"] * np.tanh(raw / c["softcap"]) if c["softcap"] else raw

    bias = np.zeros((b, c["hq"], sq, total))
    if "attn_mask" in x:
        m = x["attn_mask"]
        pad = total - m.shape[-1]
        if m.dtype == np.bool_:
            m = np.where(m, 0.0, -np.inf)
        m = np.concatenate([m, np.full(m.shape[:-1] + (pad,), -np.inf)], axis=-1)
        bias = bias + m
    i = np.arange(sq)[:, None]
    j = np.arange(total)[None, :]
    for bi in range(b):
        if c["past"]:
            offset = c["past"]
        elif c["nonpad"] is not None:
            offset = c["nonpad"][bi] - sq
        else:
            offset = 0
        pos = i + offset
        hidden = np.zeros((sq, total), dtype=bool)
        if c["causal"]:
            hidden |= j > pos
        if c["left"] is not None and c["left"] >= 0:
            hidden |= j < pos - c["left"]
        if c["right"] is not None and c["right"] >= 0:
            hidden |= j > pos + c["right"]
        if c["nonpad"] is not None:
            hidden |= j >= c["nonpad"][bi]
        bias[bi] = np.where(hidden, -np.inf, bias[bi])
    scores = capped + bias

    with np.errstate(invalid="ignore"):
        top = scores.max(axis=-1, keepdims=True)
        e = np.exp(scores - np.where(np.isneginf(top), 0, top))
        weights = e / np.where(e.sum(axis=-1, keepdims=True) == 0, 1, e.sum(axis=-1, keepdims=True))
    no_key = np.isneginf(bias).all(axis=-1, keepdims=True)
    weights = np.where(no_key, 0.0, weights)
    y = weights @ v
    if c["rank3"]:
        y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
    qk = {None: None, 0: raw, 1: capped, 2: scores, 3: weights}[c["mode"]]
    return y, present_k, present_v, qk


def write_tensor(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array, name).SerializeToString())


def main():
    rng = np.random.default_rng(SEED)
    manifest = {"seed": SEED, "onnx": onnx.__version__, "cases": []}
    for c in CASES:
        x = draw(c, rng)
        model = build(c, x, TensorProto.FLOAT)
        onnx.checker.check_model(model, full_check=True)
        x64 = {n: (a.astype(np.float64) if a.dtype == np.float32 else a) for n, a in x.items()}
        oracle = ReferenceEvaluator(build(c, x64, TensorProto.DOUBLE)).run(None, x64)
        mine = [o for o in transcribed(c, x)]
        names = [o.name for o in model.graph.output]
        wanted = {"Y": 0, "present_key": 1, "present_value": 2, "qk_matmul_output": 3}
        for name, got in zip(names, oracle):
            np.testing.assert_allclose(got, mine[wanted[name]], rtol=1e-12, atol=1e-12,
                                       err_msg=f"{c['name']}: {name}: the reference and the transcription differ")
        folder = os.path.join(HERE, c["name"])
        shutil.rmtree(folder, ignore_errors=True)
        data = os.path.join(folder, "test_data_set_0")
        os.makedirs(data)
        onnx.save(model, os.path.join(folder, "model.onnx"))
        for k, vi in enumerate(model.graph.input):
            write_tensor(os.path.join(data, f"input_{k}.pb"), x[vi.name], vi.name)
        for k, (name, got) in enumerate(zip(names, oracle)):
            write_tensor(os.path.join(data, f"output_{k}.pb"), got.astype(np.float32), name)
        manifest["cases"].append({"name": c["name"], "covers": c["covers"]})
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"wrote {len(CASES)} cases under {HERE}")


if __name__ == "__main__":
    main()
