#!/usr/bin/python3
"""Writes the models and inputs of arrays_ort_test.go: graphs whose values
*tensor.Dense cannot carry, run by ONNX Runtime for the expected outputs.

  fp16_block    a float16 transformer block at opset 17: embedding Gather,
                LayerNormalization, a fused QKV projection split in three,
                causal softmax attention over 2 heads, output projection,
                residual and a SiLU, then Cast to float32; and a Cast of
                float32 values to float16 (ties, subnormal, overflow) on a
                path of its own: ONNX Runtime drops a Cast to float16 that
                feeds an op it computes in float32, which ONNX's semantics
                (and attnrun) do not.
  empty_cache   the first step of a decoder with a KV cache: past_key of
                length 0 concatenated with the new keys, an empty Slice, a
                Split with a part of size 0, ReduceSum over an empty axes
                input (every axis), Shape of the empty past.

Run from the repository root with Debian's interpreter (numpy, onnx 1.12),
then let ONNX Runtime 1.30 write the outputs (re-running leaves git clean):

    /usr/bin/python3 onnxio/exec/testdata/arrays/gen.py
    node testdata/ort/run_cases.mjs onnxio/exec/testdata/arrays ~/.cache/attnrun/ort
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(12)


def write(name, nodes, inputs, outputs, inits, feeds):
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="attnrun gen.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    case = os.path.join(HERE, name)
    os.makedirs(os.path.join(case, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(case, "model.onnx"))
    for k, (vi, value) in enumerate(zip(inputs, feeds)):
        t = numpy_helper.from_array(value, vi.name)
        with open(os.path.join(case, "test_data_set_0", f"input_{k}.pb"), "wb") as f:
            f.write(t.SerializeToString())


def const(name, value):
    return numpy_helper.from_array(value, name)


def fp16_block():
    B, T, D, H, V = 2, 5, 8, 2, 10
    f16 = lambda *shape: (rng.standard_normal(shape) * 0.5).astype(np.float16)
    inits = [
        const("emb", f16(V, D)),
        const("gamma", (1 + f16(D) * 0.2).astype(np.float16)),
        const("beta", f16(D)),
        const("w_qkv", f16(D, 3 * D)),
        const("b_qkv", f16(3 * D)),
        const("w_o", f16(D, D)),
        const("scale", np.array(1 / np.sqrt(D // H), dtype=np.float16)),
        const("causal", np.triu(np.full((T, T), -np.inf, dtype=np.float16), 1)),
        const("split", np.array([D, D, D], dtype=np.int64)),
        const("heads", np.array([B, T, H, D // H], dtype=np.int64)),
        const("merged", np.array([B, T, D], dtype=np.int64)),
    ]
    n = helper.make_node
    nodes = [
        n("Gather", ["emb", "ids"], ["tok"]),
        n("Add", ["tok", "pos"], ["x"]),
        n("Cast", ["w32"], ["w16"], to=TensorProto.FLOAT16),
        n("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1, epsilon=1e-5),
        n("MatMul", ["ln", "w_qkv"], ["qkv0"]),
        n("Add", ["qkv0", "b_qkv"], ["qkv"]),
        n("Split", ["qkv", "split"], ["q0", "k0", "v0"], axis=-1),
    ]
    for t in "qkv":
        nodes += [n("Reshape", [t + "0", "heads"], [t + "1"]),
                  n("Transpose", [t + "1"], [t], perm=[0, 2, 1, 3])]
    nodes += [
        n("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        n("MatMul", ["q", "kt"], ["s0"]),
        n("Mul", ["s0", "scale"], ["s1"]),
        n("Add", ["s1", "causal"], ["s"]),
        n("Softmax", ["s"], ["p"], axis=-1),
        n("MatMul", ["p", "v"], ["a0"]),
        n("Transpose", ["a0"], ["a1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["a1", "merged"], ["a"]),
        n("MatMul", ["a", "w_o"], ["o"]),
        n("Add", ["o", "x"], ["r"]),
        n("Sigmoid", ["r"], ["g"]),
        n("Mul", ["r", "g"], ["y"]),
        n("Cast", ["y"], ["y32"], to=TensorProto.FLOAT),
    ]
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, [B, T]),
              helper.make_tensor_value_info("pos", TensorProto.FLOAT16, [T, D]),
              helper.make_tensor_value_info("w32", TensorProto.FLOAT, [6])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [B, T, D]),
               helper.make_tensor_value_info("p", TensorProto.FLOAT16, [B, H, T, T]),
               helper.make_tensor_value_info("y32", TensorProto.FLOAT, [B, T, D]),
               helper.make_tensor_value_info("w16", TensorProto.FLOAT16, [6])]
    # w32: ties, a subnormal, overflow and a value above 65504 that rounds down.
    w32 = np.array([1 + 2**-11, 1 + 3 * 2**-11, 2**-20, 70000, 65519, -0.1], dtype=np.float32)
    feeds = [rng.integers(0, V, (B, T)).astype(np.int64), rng.standard_normal((T, D)).astype(np.float16), w32]
    write("fp16_block", nodes, inputs, outputs, inits, feeds)


def empty_cache():
    B, T, D, H = 1, 3, 8, 2
    inits = [
        const("w_k", (rng.standard_normal((D, D)) * 0.3).astype(np.float32)),
        const("heads", np.array([B, T, H, D // H], dtype=np.int64)),
        const("zero", np.array([0], dtype=np.int64)),
        const("axis2", np.array([2], dtype=np.int64)),
        const("split", np.array([0, D], dtype=np.int64)),
        const("no_axes", np.zeros((0,), dtype=np.int64)),
    ]
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "w_k"], ["k0"]),
        n("Reshape", ["k0", "heads"], ["k1"]),
        n("Transpose", ["k1"], ["k"], perm=[0, 2, 1, 3]),
        n("Concat", ["past_key", "k"], ["present_key"], axis=2),
        n("Slice", ["present_key", "zero", "zero", "axis2"], ["none"]),
        n("Split", ["x", "split"], ["x_empty", "x_all"], axis=2),
        n("ReduceSum", ["x", "no_axes"], ["total"], keepdims=1),
        n("Shape", ["past_key"], ["past_shape"]),
        n("Exp", ["past_key"], ["past_exp"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, "T", D]),
              helper.make_tensor_value_info("past_key", TensorProto.FLOAT, [B, H, "past", D // H])]
    outputs = [helper.make_tensor_value_info("present_key", TensorProto.FLOAT, [B, H, "total", D // H]),
               helper.make_tensor_value_info("none", TensorProto.FLOAT, [B, H, 0, D // H]),
               helper.make_tensor_value_info("x_empty", TensorProto.FLOAT, [B, "T", 0]),
               helper.make_tensor_value_info("x_all", TensorProto.FLOAT, [B, "T", D]),
               helper.make_tensor_value_info("total", TensorProto.FLOAT, [1, 1, 1]),
               helper.make_tensor_value_info("past_shape", TensorProto.INT64, [4]),
               helper.make_tensor_value_info("past_exp", TensorProto.FLOAT, [B, H, "past", D // H])]
    feeds = [rng.standard_normal((B, T, D)).astype(np.float32), np.zeros((B, H, 0, D // H), dtype=np.float32)]
    write("empty_cache", nodes, inputs, outputs, inits, feeds)


fp16_block()
empty_cache()
