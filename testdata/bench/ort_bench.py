#!/usr/bin/env python3
"""ONNX Runtime (Python) side of scripts/bench_shapes.sh: times one ONNX
model's forward pass on the CPU execution provider on a random float32
input of --shape, fed to every input.

Usage, from the repository root, with the reference virtualenv that
scripts/install-reference-tools.sh makes (onnxruntime 1.31.1):

    ~/.cache/attnrun/venv/bin/python testdata/bench/ort_bench.py MODEL.onnx --shape 1,16,768 --threads 2

The session runs with intra_op_num_threads = --threads, one inter-op
thread, sequential execution and all graph optimizations, as
ort_bench.mjs does for onnxruntime-node. It warms up, then runs until --time
seconds have passed and at least 3 runs were timed, and prints one line of
key=value pairs like torch_bench.py: median, min, p10 and p90 latency in ms,
the run count and the ONNX Runtime version.
"""

import argparse
import statistics
import time

import numpy as np
import onnxruntime as ort


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--shape", required=True, help="B,T,D")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--time", type=float, default=2.0, help="seconds to time (at least 3 runs)")
    args = p.parse_args()
    shape = [int(v) for v in args.shape.split(",")]

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(args.model, opts, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    feeds = {i.name: x for i in sess.get_inputs()}

    for _ in range(args.warmup):
        sess.run(None, feeds)
    times = []
    start = time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < args.time:
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1e3
    print(f"ort={ort.__version__} threads={args.threads} median_ms={statistics.median(ms):.4f} "
          f"min_ms={ms.min():.4f} p10_ms={np.percentile(ms, 10):.4f} p90_ms={np.percentile(ms, 90):.4f} runs={len(times)}")


if __name__ == "__main__":
    main()
