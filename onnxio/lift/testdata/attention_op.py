#!/usr/bin/python3
"""Writes an ONNX graph with the Attention op in the 4-D form, for the
lifting tests: the form PyTorch 2.x's exporter gives scaled_dot_product
attention (attnrun's own exports use the 3-D form, tested on the fly).

    /usr/bin/python3 onnxio/lift/testdata/attention_op.py

writes onnxio/lift/testdata/attention_op_4d/model.onnx (opset 23, IR 10) and
test_data_set_0 with its output computed here in NumPy from the ONNX
specification. The graph: x (batch, seq, 16) projected with biases to
queries (4 heads of 4) and keys and values (2 heads: grouped-query
attention), split into heads by Reshape and Transpose, RotaryEmbedding on
queries and keys (half-split, base 10000, caches of 64 positions as a
constant, position ids from Range), Attention with is_causal and scale 0.4,
the heads merged back and an output projection with bias. python3-onnx 1.12
predates opset 23, so the model is written without its checker.
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
D, H, HKV, HD, BASE, MAXPOS, SCALE = 16, 4, 2, 4, 10000.0, 64, 0.4


def rope_tables():
    theta = BASE ** (-np.arange(0, HD, 2, dtype=np.float64) / HD)
    angle = np.arange(MAXPOS, dtype=np.float64)[:, None] * theta[None, :]
    return np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)


def rotate(x, cos, sin):
    """Half-split rotation of x (B, H, T, HD) at positions 0..T-1."""
    t = x.shape[2]
    c, s = cos[:t][None, None], sin[:t][None, None]
    a, b = x[..., : HD // 2], x[..., HD // 2:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def reference(x, w):
    b, t, _ = x.shape
    cos, sin = rope_tables()
    heads = lambda y, n: y.reshape(b, t, n, HD).transpose(0, 2, 1, 3)
    q = rotate(heads(x @ w["wq"] + w["bq"], H), cos, sin)
    k = rotate(heads(x @ w["wk"] + w["bk"], HKV), cos, sin)
    v = heads(x @ w["wv"] + w["bv"], HKV)
    k, v = np.repeat(k, H // HKV, axis=1), np.repeat(v, H // HKV, axis=1)
    s = SCALE * (q @ k.transpose(0, 1, 3, 2))
    s = np.where(np.triu(np.ones((t, t), bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    y = (p @ v).transpose(0, 2, 1, 3).reshape(b, t, H * HD)
    return (y @ w["wo"] + w["bo"]).astype(np.float32)


def main():
    rng = np.random.default_rng(2306)
    w = {
        "wq": rng.standard_normal((D, H * HD)), "bq": rng.standard_normal(H * HD),
        "wk": rng.standard_normal((D, HKV * HD)), "bk": rng.standard_normal(HKV * HD),
        "wv": rng.standard_normal((D, HKV * HD)), "bv": rng.standard_normal(HKV * HD),
        "wo": rng.standard_normal((H * HD, D)), "bo": rng.standard_normal(D),
    }
    w = {k: (0.3 * v).astype(np.float32) for k, v in w.items()}
    cos, sin = rope_tables()
    inits = [numpy_helper.from_array(v, k) for k, v in w.items()]
    inits += [numpy_helper.from_array(cos, "cos_cache"), numpy_helper.from_array(sin, "sin_cache")]
    ints = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)
    inits += [ints("split_q", [0, 0, H, HD]), ints("split_kv", [0, 0, HKV, HD]), ints("merge", [0, 0, H * HD]),
              ints("zero", 0), ints("one", 1), ints("axis0", [0]), ints("axis1", [1])]
    n = helper.make_node
    nodes = []
    for name, heads in (("q", "split_q"), ("k", "split_kv"), ("v", "split_kv")):
        nodes += [n("MatMul", ["x", "w" + name], [name + "_mm"], name="/attn/%s_proj/MatMul" % name),
                  n("Add", [name + "_mm", "b" + name], [name + "_lin"], name="/attn/%s_proj/Add" % name),
                  n("Reshape", [name + "_lin", heads], [name + "_split"], name="/attn/Reshape_" + name),
                  n("Transpose", [name + "_split"], [name + "_heads"], perm=[0, 2, 1, 3], name="/attn/Transpose_" + name)]
    nodes += [n("Shape", ["x"], ["shape"], name="/attn/Shape"),
              n("Gather", ["shape", "one"], ["seq"], axis=0, name="/attn/Gather_seq"),
              n("Gather", ["shape", "axis0"], ["batch1"], axis=0, name="/attn/Gather_batch"),
              n("Gather", ["shape", "axis1"], ["seq1"], axis=0, name="/attn/Gather_seq1"),
              n("Concat", ["batch1", "seq1"], ["pos_shape"], axis=0, name="/attn/Concat"),
              n("Range", ["zero", "seq", "one"], ["range"], name="/attn/Range"),
              n("Unsqueeze", ["range", "axis0"], ["range1"], name="/attn/Unsqueeze"),
              n("Expand", ["range1", "pos_shape"], ["pos"], name="/attn/Expand"),
              n("RotaryEmbedding", ["q_heads", "cos_cache", "sin_cache", "pos"], ["q_rot"], name="/attn/RotaryEmbedding_q"),
              n("RotaryEmbedding", ["k_heads", "cos_cache", "sin_cache", "pos"], ["k_rot"], name="/attn/RotaryEmbedding_k"),
              n("Attention", ["q_rot", "k_rot", "v_heads"], ["context"], is_causal=1, scale=SCALE, name="/attn/Attention"),
              n("Transpose", ["context"], ["context_t"], perm=[0, 2, 1, 3], name="/attn/Transpose_out"),
              n("Reshape", ["context_t", "merge"], ["merged"], name="/attn/Reshape_out"),
              n("MatMul", ["merged", "wo"], ["o_mm"], name="/attn/o_proj/MatMul"),
              n("Add", ["o_mm", "bo"], ["y"], name="/attn/o_proj/Add")]
    graph = helper.make_graph(
        nodes, "attention_op_4d",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", D])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], producer_name="attention_op.py")
    model.ir_version = 10
    out = os.path.join(HERE, "attention_op_4d")
    os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(out, "model.onnx"))
    x = rng.standard_normal((2, 5, D)).astype(np.float32)
    for name, t in (("input_0.pb", numpy_helper.from_array(x, "x")), ("output_0.pb", numpy_helper.from_array(reference(x, w), "y"))):
        with open(os.path.join(out, "test_data_set_0", name), "wb") as f:
            f.write(t.SerializeToString())
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
