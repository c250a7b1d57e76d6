"""Decoding steps with a KV cache for the executor's attention fusion test.

For each decoder of testdata/pytorch2/fixtures below (PyTorch 2.15's
TorchScript exports of seeded Hugging Face models, with past_key_values
inputs), writes <fixture>/test_data_set_0: one new token per sequence
(batch 2) after a cache of 5 positions, every position visible
(attention_mask of ones), random cache and token ids (below 32, the smaller vocabulary) from a
fixed seed; the outputs are ONNX Runtime's on the same graph (all of
them: logits and every present.*). test_data_set_1 is the same step with
a NaN in layer 0's cached keys. exec's TestDecodeStepsFused holds the
executor to them and checks that the fused attention ran.

    ~/.cache/attnrun/venv/bin/python onnxio/exec/testdata/decode/gen.py

ONNX Runtime 1.31.1, CPU, graph optimizations off (the graph as written).
"""
import os

import numpy as np
import onnxruntime as ort
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "..", "..", "testdata", "pytorch2", "fixtures")
BATCH, PAST = 2, 5


def main():
    for name in ["llama_sdpa_ts17", "gpt2_sdpa_ts17"]:
        path = os.path.join(FIXTURES, name, "model.onnx")
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(15)
        feeds = {}
        for inp in sess.get_inputs():
            if inp.name == "input_ids":
                feeds[inp.name] = rng.integers(0, 32, size=(BATCH, 1), dtype=np.int64)
            elif inp.name == "attention_mask":
                feeds[inp.name] = np.ones((BATCH, PAST + 1), dtype=np.int64)
            elif inp.name.startswith("past_key_values."):
                heads, dim = inp.shape[1], inp.shape[3]
                feeds[inp.name] = rng.standard_normal((BATCH, heads, PAST, dim)).astype(np.float32)
            else:
                raise SystemExit(f"{name}: unexpected input {inp.name}")
        write(sess, feeds, os.path.join(HERE, name, "test_data_set_0"))
        # A NaN in layer 0's cached keys makes the scores of the heads
        # reading them NaN; the export's Where(IsNaN(P), 0, P) zeroes their
        # weights, which the fused attention must notice.
        key = feeds["past_key_values.0.key"].copy()
        key[0, 0, 1, 0] = np.nan
        feeds["past_key_values.0.key"] = key
        write(sess, feeds, os.path.join(HERE, name, "test_data_set_1"))
        print(name, "onnxruntime", ort.__version__)


def write(sess, feeds, out_dir):
    """Runs sess on feeds and writes inputs and outputs into out_dir."""
    outs = sess.run(None, feeds)
    os.makedirs(out_dir, exist_ok=True)
    for k, inp in enumerate(sess.get_inputs()):
        t = numpy_helper.from_array(feeds[inp.name], inp.name)
        with open(os.path.join(out_dir, f"input_{k}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    for k, (o, v) in enumerate(zip(sess.get_outputs(), outs)):
        t = numpy_helper.from_array(v, o.name)
        with open(os.path.join(out_dir, f"output_{k}.pb"), "wb") as f:
            f.write(t.SerializeToString())


if __name__ == "__main__":
    main()
