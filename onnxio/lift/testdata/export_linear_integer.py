"""Writes quantized Linear graphs as ONNX Runtime's quantizer writes them,
for the nn.linear_integer lifting tests, with ONNX Runtime's outputs:

    y = Cast<float>(MatMulInteger(x, W, x_zp, w_zp)) * Mul(x_scale, w_scale) + b

- linear_integer_u8s8_columns: uint8 tokens (B, T, 16), an int8 weight
  (16, 24) with a scale and a nonzero zero point per output column, all
  initializers; test_data_set_0 and _1 at two batch and sequence sizes.
- linear_integer_u8s8_tensor: the same with one weight scale for the whole
  tensor and no zero points (MatMulInteger of two inputs: 0).
- linear_integer_u8u8_inputs: uint8 tokens (B, T, 16) flattened to
  (B*T, 16) and back around the product (as torch.onnx writes a Linear
  on 3-D tokens for Gemm), a uint8 weight, and every parameter a graph
  input (ONNX Runtime's quantized Attention tests), the weight scale and
  zero point declared [C]: test_data_set_0 feeds one per column,
  test_data_set_1 one for the whole tensor.

Both feed tokens and weights over the types' whole range, so that the
int32 sums reach about 2^20 and their conversion to float32 rounds.

Usage, from the repository root (the pinned venv has onnx and
onnxruntime):

    ~/.cache/attnrun/venv/bin/python onnxio/lift/testdata/export_linear_integer.py
"""

import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
D_IN, D_OUT = 16, 24
rng = np.random.default_rng(20261126)


def quantized_linear(flatten, zero_points=True):
    """The nodes from tokens "x" to "y", reading the parameters by name."""
    nodes = []
    x = "x"
    if flatten:
        nodes.append(helper.make_node("Shape", ["x"], ["x_shape"]))
        nodes.append(helper.make_node("Reshape", ["x", "flat"], ["x_rows"], name="flatten"))
        x = "x_rows"
    nodes += [
        helper.make_node("MatMulInteger", [x, "W"] + (["x_zero_point", "w_zero_point"] if zero_points else []), ["sums"], name="matmul_quant"),
        helper.make_node("Cast", ["sums"], ["sums_float"], to=TensorProto.FLOAT, name="cast"),
        helper.make_node("Mul", ["x_scale", "w_scale"], ["scales"], name="scales_mul"),
        helper.make_node("Mul", ["sums_float", "scales"], ["scaled"], name="output_scale_mul"),
    ]
    if flatten:
        nodes += [
            helper.make_node("Add", ["scaled", "b"], ["y_rows"], name="add_bias"),
            helper.make_node("Slice", ["x_shape", "zero", "two"], ["lead"]),
            helper.make_node("Concat", ["lead", "width"], ["y_shape"], axis=0),
            helper.make_node("Reshape", ["y_rows", "y_shape"], ["y"], name="unflatten"),
        ]
    else:
        nodes.append(helper.make_node("Add", ["scaled", "b"], ["y"], name="add_bias"))
    return nodes


def params(weight_type, columns):
    w_lo, w_hi = (-128, 128) if weight_type == np.int8 else (0, 256)
    return {
        "W": rng.integers(w_lo, w_hi, size=(D_IN, D_OUT)).astype(weight_type),
        "b": rng.normal(0, 0.5, size=D_OUT).astype(np.float32),
        "x_scale": np.array([0.0173], dtype=np.float32),
        "x_zero_point": np.array([131], dtype=np.uint8),
        "w_scale": rng.uniform(1e-3, 4e-3, size=columns).astype(np.float32),
        "w_zero_point": rng.integers(w_lo // 8, w_hi // 8, size=columns).astype(weight_type),
    }


def tokens(b, t):
    return rng.integers(0, 256, size=(b, t, D_IN)).astype(np.uint8)


def write(name, model, sets):
    onnx.checker.check_model(model)
    folder = os.path.join(HERE, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    for k, feeds in enumerate(sets):
        out = sess.run(None, feeds)
        d = os.path.join(folder, f"test_data_set_{k}")
        os.makedirs(d)
        for i, n in enumerate(names):
            onnx.save_tensor(numpy_helper.from_array(feeds[n], n), os.path.join(d, f"input_{i}.pb"))
        onnx.save_tensor(numpy_helper.from_array(out[0], "y"), os.path.join(d, "output_0.pb"))
        print(name, k, {n: feeds[n].shape for n in names}, "y", out[0].shape)


def tokens_input():
    return helper.make_tensor_value_info("x", TensorProto.UINT8, ["batch", "seq", D_IN])


def output():
    return helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", D_OUT])


def u8s8_columns():
    p = params(np.int8, D_OUT)
    inits = [numpy_helper.from_array(v, k) for k, v in p.items()]
    graph = helper.make_graph(quantized_linear(False), "linear_integer", [tokens_input()], [output()], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], producer_name="onnx.quantize")
    model.ir_version = 6
    write("linear_integer_u8s8_columns", model, [{"x": tokens(2, 3)}, {"x": tokens(1, 5)}])


def u8s8_tensor():
    p = params(np.int8, 1)
    del p["x_zero_point"], p["w_zero_point"]
    inits = [numpy_helper.from_array(v, k) for k, v in p.items()]
    graph = helper.make_graph(quantized_linear(False, zero_points=False), "linear_integer", [tokens_input()], [output()], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], producer_name="onnx.quantize")
    model.ir_version = 6
    write("linear_integer_u8s8_tensor", model, [{"x": tokens(2, 3)}, {"x": tokens(1, 4)}])


def u8u8_inputs():
    types = {"W": (TensorProto.UINT8, [D_IN, D_OUT]), "b": (TensorProto.FLOAT, [D_OUT]),
             "x_scale": (TensorProto.FLOAT, [1]), "x_zero_point": (TensorProto.UINT8, [1]),
             "w_scale": (TensorProto.FLOAT, ["C"]), "w_zero_point": (TensorProto.UINT8, ["C"])}
    inputs = [tokens_input()] + [helper.make_tensor_value_info(k, t, s) for k, (t, s) in types.items()]
    consts = [numpy_helper.from_array(np.array([-1, D_IN], dtype=np.int64), "flat"),
              numpy_helper.from_array(np.array([0], dtype=np.int64), "zero"),
              numpy_helper.from_array(np.array([2], dtype=np.int64), "two"),
              numpy_helper.from_array(np.array([D_OUT], dtype=np.int64), "width")]
    graph = helper.make_graph(quantized_linear(True), "linear_integer", inputs, [output()], consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], producer_name="onnx.quantize")
    model.ir_version = 6
    per_column, per_tensor = params(np.uint8, D_OUT), params(np.uint8, 1)
    write("linear_integer_u8u8_inputs", model, [dict(x=tokens(2, 4), **per_column), dict(x=tokens(3, 2), **per_tensor)])


if __name__ == "__main__":
    u8s8_columns()
    u8s8_tensor()
    u8u8_inputs()
