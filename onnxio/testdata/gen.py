#!/usr/bin/python3
"""Writes the reference files of onnxio's tests with the onnx Python package.

The tensors are written by onnx itself (numpy_helper.from_array for
raw_data, helper.make_tensor for the typed fields), so the Go decoder is
checked against the reference writer, not against our own encoder.

Run from this directory with Debian's interpreter (python3-onnx):

    /usr/bin/python3 gen.py

The values are repeated in tensor_test.go (referenceTensors); change both
together.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPE = (2, 3)
FLOATS = [1.0, -2.5, 0.333251953125, 65504.0, 5.960464477539063e-08, -0.0]
INTS = [0, 1, -1, 127, -128, 42]
UINTS = [0, 1, 2, 127, 128, 255]
BOOLS = [True, False, True, True, False, False]
BIG = [0, 1, -1, 2**40, -(2**40), 2**63 - 1]


def bfloat16_bits(values):
    """Truncates float32 values to bfloat16 bit patterns (exact for ours)."""
    return (np.array(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def typed_int32(name, dtype, bit_patterns):
    """A 16-bit float tensor in int32_data, one bit pattern per value, as
    the spec stores FLOAT16 and BFLOAT16 in the typed field."""
    t = TensorProto(name=name, data_type=dtype, dims=SHAPE)
    t.int32_data.extend(bit_patterns)
    return t


def tensors():
    """Yields (file stem, TensorProto)."""
    arrays = {
        "float32": np.array(FLOATS, dtype=np.float32),
        "float64": np.array(FLOATS, dtype=np.float64),
        "float16": np.array(FLOATS, dtype=np.float16),
        "int64": np.array(BIG, dtype=np.int64),
        "int32": np.array(INTS, dtype=np.int32),
        "int16": np.array(INTS, dtype=np.int16),
        "int8": np.array(INTS, dtype=np.int8),
        "uint64": np.array(UINTS, dtype=np.uint64),
        "uint32": np.array(UINTS, dtype=np.uint32),
        "uint16": np.array(UINTS, dtype=np.uint16),
        "uint8": np.array(UINTS, dtype=np.uint8),
        "bool": np.array(BOOLS, dtype=np.bool_),
    }
    for name, a in arrays.items():
        a = a.reshape(SHAPE)
        yield name + "_raw", numpy_helper.from_array(a, name)
        dtype = onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype]
        if name == "float16":
            vals = a.flatten().view(np.uint16).astype(np.int32).tolist()
            t = typed_int32(name, dtype, vals)
        else:
            t = helper.make_tensor(name, dtype, SHAPE, a.flatten().tolist(), raw=False)
        yield name + "_typed", t
    bits = bfloat16_bits([1.0, -2.5, 3.140625, 65280.0, -0.0, 0.5])
    yield "bfloat16_raw", helper.make_tensor("bfloat16", TensorProto.BFLOAT16, SHAPE, bits.tobytes(), raw=True)
    yield "bfloat16_typed", typed_int32("bfloat16", TensorProto.BFLOAT16, bits.astype(np.int32).tolist())
    yield "scalar_float32", numpy_helper.from_array(np.array(7.5, dtype=np.float32), "scalar")
    # Tensors of zero elements: a KV cache of past length 0, empty axes.
    yield "empty_float32_raw", numpy_helper.from_array(np.zeros((2, 0, 3), dtype=np.float32), "past")
    yield "empty_int64_typed", helper.make_tensor("axes", TensorProto.INT64, (0,), [], raw=False)
    yield "empty_float16_raw", numpy_helper.from_array(np.zeros((0,), dtype=np.float16), "h")
    # float16 specials: NaN, infinities, the smallest subnormal and normal.
    specials = np.array([np.nan, np.inf, -np.inf, 2**-24, -(2**-14), 0.1], dtype=np.float16)
    yield "float16_specials_raw", numpy_helper.from_array(specials, "specials")


def external_model(out_dir):
    """A MatMul+Add model whose two initializers live in weights.bin."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 8
    b = np.array([0.5, -1.0, 2.0, -4.0], dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"], name="matmul"),
         helper.make_node("Add", ["xw", "b"], ["y"], name="add")],
        "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, producer_name="onnxio-gen",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    os.makedirs(out_dir, exist_ok=True)
    # onnx appends external data to an existing file: start from none, so
    # that running the script again writes the same bytes.
    weights = os.path.join(out_dir, "weights.bin")
    if os.path.exists(weights):
        os.remove(weights)
    onnx.save_model(model, os.path.join(out_dir, "model.onnx"),
                    save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)


def main():
    os.makedirs("tensors", exist_ok=True)
    for stem, t in tensors():
        with open(os.path.join("tensors", stem + ".pb"), "wb") as f:
            f.write(t.SerializeToString())
    external_model("external")


if __name__ == "__main__":
    main()
