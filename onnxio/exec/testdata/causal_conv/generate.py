"""Writes the CausalConvWithState (opset 27) cases that
ops_causal_conv_test.go runs: one folder per case with model.onnx and
test_data_set_0, and manifest.json.

The expected outputs are ONNX's reference implementation
(onnx.reference.ReferenceEvaluator, onnx 1.23.2) run on a float64 copy of
each model, checked against `transcribed`, the operator written out from
its specification (output[b, c, t] = sum_i W[c, 0, i] * S[b, c, t + i] +
bias[c] for S = past_state ++ input, SiLU if asked, present_state the last
k - 1 positions of S).

Run with the reference tools' Python (scripts/install-reference-tools.sh):

    ~/.cache/attnrun/venv/bin/python onnxio/exec/testdata/causal_conv/generate.py
"""

import json
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 27
OPSET = 27

# name, covers, batch, channels, length, k, bias, past, activation
CASES = [
    ("qwen3_next_prefill", "k 4 as Qwen3-Next's short convolution, SiLU, bias, no past: zeros before the sequence",
     2, 6, 9, 4, True, False, "silu"),
    ("decode_with_past", "one token after a past state, no bias, no activation",
     3, 5, 1, 4, False, True, None),
    ("shorter_than_state", "2 tokens with a state of 4: present_state keeps 2 past positions",
     2, 3, 2, 5, True, True, "swish"),
    ("long_prefill_past", "40 tokens after a past state, k 3, bias, activation none spelled out",
     1, 8, 40, 3, True, True, "none"),
    ("kernel_one", "k 1: a per-channel scale, an empty state",
     2, 4, 5, 1, True, False, None),
]


def draw(rng, batch, channels, length, k, bias, past):
    x = {"input": rng.standard_normal((batch, channels, length)).astype(np.float32),
         "weight": rng.standard_normal((channels, 1, k)).astype(np.float32)}
    if bias:
        x["bias"] = rng.standard_normal(channels).astype(np.float32)
    if past:
        x["past_state"] = rng.standard_normal((batch, channels, k - 1)).astype(np.float32)
    return x


def build(name, x, activation, elem):
    names = ["input", "weight", "bias", "past_state"]
    node_in = [n if n in x else "" for n in names]
    while node_in[-1] == "":
        node_in.pop()
    attrs = {} if activation is None else {"activation": activation}
    node = helper.make_node("CausalConvWithState", node_in, ["output", "present_state"], **attrs)
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, elem, list(x[n].shape)) for n in names if n in x],
        [helper.make_tensor_value_info(o, elem, None) for o in ("output", "present_state")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    if elem != TensorProto.FLOAT:
        return model  # the op's types are float16, bfloat16 and float: the oracle's copy is not checked
    return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


def transcribed(x, activation):
    xs, w = x["input"].astype(np.float64), x["weight"].astype(np.float64)
    batch, channels, length = xs.shape
    k = w.shape[2]
    past = x["past_state"].astype(np.float64) if "past_state" in x else np.zeros((batch, channels, k - 1))
    s = np.concatenate([past, xs], axis=2)
    out = np.zeros_like(xs)
    for t in range(length):
        out[:, :, t] = (w[None, :, 0, :] * s[:, :, t:t + k]).sum(axis=-1)
    if "bias" in x:
        out += x["bias"].astype(np.float64)[None, :, None]
    if activation in ("silu", "swish"):
        out = out / (1 + np.exp(-out))
    return out, s[:, :, length:]


def main():
    rng = np.random.default_rng(SEED)
    manifest = {"seed": SEED, "onnx": onnx.__version__, "cases": []}
    for name, covers, batch, channels, length, k, bias, past, activation in CASES:
        x = draw(rng, batch, channels, length, k, bias, past)
        model = build(name, x, activation, TensorProto.FLOAT)
        onnx.checker.check_model(model, full_check=True)
        x64 = {n: a.astype(np.float64) for n, a in x.items()}
        oracle = ReferenceEvaluator(build(name, x64, activation, TensorProto.DOUBLE)).run(None, x64)
        for got, want, what in zip(oracle, transcribed(x, activation), ("output", "present_state")):
            # The reference computes the SiLU in float32 whatever the input's
            # type: its float64 outputs are float32-accurate after it.
            tol = 1e-6 if activation in ("silu", "swish") else 1e-12
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol,
                                       err_msg=f"{name}: {what}: the reference and the transcription differ")
        folder = os.path.join(HERE, name)
        shutil.rmtree(folder, ignore_errors=True)
        data = os.path.join(folder, "test_data_set_0")
        os.makedirs(data)
        onnx.save(model, os.path.join(folder, "model.onnx"))
        for i, vi in enumerate(model.graph.input):
            with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(x[vi.name], vi.name).SerializeToString())
        for i, (vi, got) in enumerate(zip(model.graph.output, oracle)):
            with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(got.astype(np.float32), vi.name).SerializeToString())
        manifest["cases"].append({"name": name, "covers": covers})
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"wrote {len(CASES)} cases under {HERE}")


if __name__ == "__main__":
    main()
