#!/usr/bin/python3
"""PyTorch side of scripts/bench.sh: exports the benchmark modules to ONNX,
times them in PyTorch, and times a float32 GEMM on the BLAS PyTorch and
numpy are linked with.

Usage, from the repository root (Debian's python3-torch and python3-onnx):

    /usr/bin/python3 testdata/bench/torch_bench.py export --out DIR [--context 2048]
    /usr/bin/python3 testdata/bench/torch_bench.py mha --shape 4,512,768 --threads 2
    /usr/bin/python3 testdata/bench/torch_bench.py gemm --n 1024 --threads 2

export writes DIR/mha_768.onnx (modules.MultiHeadAttention(768, 768,
context, 12): causal, no qkv bias, out_proj bias; seed 0) and
DIR/attention_d64.onnx (modules.SimpleAttention(scaled=True, causal=True)),
opset 17, with symbolic batch and sequence axes. The multi-head module keeps
a (context, context) bool mask that the export stores as an initializer, so
context is the longest T the file accepts and costs context² bytes.

mha and attention time the forward pass in inference mode with
torch.set_num_threads(N). gemm times an n×n×n float32 product with numpy
(cblas_sgemm) and with torch.matmul, and names the BLAS library the process
loaded: Debian links both against libblas.so.3, which is the reference BLAS
unless the OpenBLAS alternative is selected or put first on
LD_LIBRARY_PATH (scripts/bench.sh does the latter).

Each timing warms up, then runs until --time seconds have passed and at
least 3 runs were timed, and prints one line of key=value pairs: the median,
min, p10 and p90 latency in ms (numpy's linear interpolation, as attnrun bench),
the run count, and peak_rss_mib, the process's peak RSS (VmHWM) reset just
before the warm-up, so it is the resident libraries and tensors plus what
the timed code adds; rss_before_mib is the RSS at that reset.
"""

import argparse
import gc
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
import modules  # noqa: E402

BT = {0: "batch", 1: "seq"}


def mha_768(context):
    torch.manual_seed(0)
    return modules.MultiHeadAttention(768, 768, context, 12, dropout=0.0,
                                      qkv_bias=False, out_bias=True, causal=True).eval()


def attention_d64():
    return modules.SimpleAttention(scaled=True, causal=True).eval()


def export(args):
    import onnx

    os.makedirs(args.out, exist_ok=True)
    cases = [("mha_768.onnx", mha_768(args.context), 768),
             ("attention_d64.onnx", attention_d64(), 64)]
    for name, module, d in cases:
        path = os.path.join(args.out, name)
        example = torch.randn(2, 16, d, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            torch.onnx.export(module, (example,), path, opset_version=17,
                              input_names=["x"], output_names=["y"],
                              dynamic_axes={"x": BT, "y": BT})
        onnx.checker.check_model(onnx.load(path), full_check=True)
        print(f"wrote {path}")


def status_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/self/status")


def reset_peak_rss():
    """Sets VmHWM to the current RSS (proc(5), clear_refs); returns that RSS in KiB."""
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return status_kib("VmRSS")


def timed(fn, warmup, budget):
    before = reset_peak_rss()
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < budget:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1e3
    return {
        "median_ms": statistics.median(ms),
        "min_ms": float(ms.min()),
        "p10_ms": float(np.percentile(ms, 10)),
        "p90_ms": float(np.percentile(ms, 90)),
        "runs": len(times),
        "peak_rss_mib": status_kib("VmHWM") / 1024,
        "rss_before_mib": before / 1024,
    }


def report(prefix, result, **extra):
    result = {**extra, **result}
    fields = " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items())
    print(f"{prefix} {fields}".strip())


def forward_bench(args, module):
    torch.set_num_threads(args.threads)
    b, t, d = (int(v) for v in args.shape.split(","))
    x = torch.randn(b, t, d, generator=torch.Generator().manual_seed(0))

    def run():
        with torch.inference_mode():
            module(x)

    report("", timed(run, args.warmup, args.time), threads=torch.get_num_threads())


def blas_library():
    """The BLAS shared library this process loaded, from /proc/self/maps."""
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "blas" in line.lower() and ".so" in line}
    return ",".join(sorted(os.path.realpath(p) for p in libs)) or "none"


def gemm(args):
    n = args.n
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    flops = 2.0 * n * n * n
    res = timed(lambda: np.matmul(a, b, out=c), args.warmup, args.time)
    report("numpy", res, gflops=flops / res["median_ms"] / 1e6, best_gflops=flops / res["min_ms"] / 1e6)
    ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.empty(n, n)
    res = timed(lambda: torch.matmul(ta, tb, out=tc), args.warmup, args.time)
    report("torch", res, gflops=flops / res["median_ms"] / 1e6, best_gflops=flops / res["min_ms"] / 1e6)
    print(f"blas={blas_library()}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="write mha_768.onnx and attention_d64.onnx")
    e.add_argument("--out", required=True)
    e.add_argument("--context", type=int, default=2048, help="context_length of the multi-head module")
    for name in ("mha", "attention", "gemm"):
        s = sub.add_parser(name)
        s.add_argument("--threads", type=int, default=2)
        s.add_argument("--warmup", type=int, default=2)
        s.add_argument("--time", type=float, default=2.0, help="seconds to time (at least 3 runs)")
        if name == "gemm":
            s.add_argument("--n", type=int, default=1024)
        else:
            s.add_argument("--shape", required=True, help="B,T,D")
        if name == "mha":
            s.add_argument("--context", type=int, default=2048)
    args = p.parse_args()
    if args.cmd == "export":
        export(args)
    elif args.cmd == "mha":
        forward_bench(args, mha_768(args.context))
    elif args.cmd == "attention":
        forward_bench(args, attention_d64())
    else:
        gemm(args)


if __name__ == "__main__":
    main()
