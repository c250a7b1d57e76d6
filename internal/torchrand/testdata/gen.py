#!/usr/bin/python3
"""Writes the goldens for torchrand: what PyTorch 1.13's CPU generator draws.

Run with Debian's interpreter (it has python3-torch 1.13):

    /usr/bin/python3 internal/torchrand/testdata/gen.py

It runs itself once per CPU capability (ATEN_CPU_CAPABILITY must be set
before torch is imported) and writes torch_avx2.json and torch_default.json
next to this script. Each case seeds the default generator, then makes a
sequence of calls; every call's result is stored as exact float values
(JSON floats round-trip float32 exactly), or, when longer than HASH_OVER
values, as the SHA-256 of its little-endian bytes plus its first and last
values.
"""
import hashlib
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = [0, 1, 42, 123, 239, 789, 1337]
SIZES = [1, 2, 6, 15, 16, 17, 33, 100]
HASH_OVER = 128
EDGE = 8


def result(t):
    """Encodes a tensor's values for the golden file."""
    import numpy as np
    flat = t.detach().contiguous().reshape(-1).numpy()
    out = {"n": int(flat.size)}
    if flat.dtype == np.int64:
        vals = [int(v) for v in flat]
    else:
        vals = [float(v) for v in flat]
    if flat.size > HASH_OVER:
        le = flat.astype(flat.dtype.newbyteorder("<"))
        out["sha256"] = hashlib.sha256(le.tobytes()).hexdigest()
        out["head"] = vals[:EDGE]
        out["tail"] = vals[-EDGE:]
    else:
        out["values"] = vals
    return out


def run_step(torch, step):
    """Makes one PyTorch call described by step and records what it drew."""
    op = step["op"]
    size = tuple(step.get("size", ()))
    if op == "rand":
        step["result"] = result(torch.rand(size))
    elif op == "randn":
        step["result"] = result(torch.randn(size))
    elif op == "uniform":
        step["result"] = result(torch.empty(size).uniform_(step["from"], step["to"]))
    elif op == "normal":
        step["result"] = result(torch.empty(size).normal_(step["mean"], step["std"]))
    elif op == "randint":
        step["result"] = result(torch.randint(step["low"], step["high"], size))
    elif op == "linear":
        layer = torch.nn.Linear(step["in"], step["out"], bias=step["bias"])
        step["weight_bound"] = math.sqrt(3.0) * (
            torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5)) / math.sqrt(step["in"]))
        step["weight"] = result(layer.weight)
        if step["bias"]:
            step["bias_bound"] = 1 / math.sqrt(step["in"])
            step["bias_values"] = result(layer.bias)
    elif op == "embedding":
        step["result"] = result(torch.nn.Embedding(step["num"], step["dim"]).weight)
    else:
        raise ValueError(op)
    return step


def cases():
    """Lists the cases: a seed and the calls made after seeding."""
    out = []
    for seed in SEEDS:
        for n in SIZES:
            out.append({"name": f"rand/seed{seed}/n{n}", "seed": seed,
                        "steps": [{"op": "rand", "size": [n]}]})
            out.append({"name": f"randn/seed{seed}/n{n}", "seed": seed,
                        "steps": [{"op": "randn", "size": [n]}]})
        out.append({"name": f"linear3x2/seed{seed}", "seed": seed,
                    "steps": [{"op": "linear", "in": 3, "out": 2, "bias": True}]})
        out.append({"name": f"linear768/seed{seed}", "seed": seed,
                    "steps": [{"op": "linear", "in": 768, "out": 768, "bias": True}]})
        out.append({"name": f"embedding5x3/seed{seed}", "seed": seed,
                    "steps": [{"op": "embedding", "num": 5, "dim": 3}]})
        out.append({"name": f"randint0to10/seed{seed}", "seed": seed,
                    "steps": [{"op": "randint", "low": 0, "high": 10, "size": [3, 2]}]})
    out += [
        # Notebook 003: three randn(3, 2) after manual_seed(1).
        {"name": "notebook003/W_qkv", "seed": 1,
         "steps": [{"op": "randn", "size": [3, 2]}] * 3},
        # Notebook 000: three rand(3, 2) after manual_seed(123).
        {"name": "notebook000/W_qkv", "seed": 123,
         "steps": [{"op": "rand", "size": [3, 2]}] * 3},
        # Notebook 000 SelfAttention_v2: three nn.Linear(3, 2, bias=False).
        {"name": "notebook000/v2_seed789", "seed": 789,
         "steps": [{"op": "linear", "in": 3, "out": 2, "bias": False}] * 3},
        # The spare scalar normal survives rand and the block path, and is
        # rescaled by the next call's mean and std.
        {"name": "spare_normal", "seed": 5,
         "steps": [{"op": "randn", "size": [5]}, {"op": "rand", "size": [2]},
                   {"op": "randn", "size": [1]}, {"op": "randn", "size": [3]},
                   {"op": "randn", "size": [20]},
                   {"op": "normal", "size": [1], "mean": 0.37, "std": 1.7},
                   {"op": "normal", "size": [7], "mean": -2.0, "std": 0.01}]},
        {"name": "uniform_bounds", "seed": 11,
         "steps": [{"op": "uniform", "size": [100], "from": -0.1234567, "to": 0.3456789},
                   {"op": "uniform", "size": [50], "from": -0.3, "to": 0.7},
                   {"op": "uniform", "size": [50], "from": 2.0, "to": 2.0},
                   {"op": "uniform", "size": [40], "from": -1e6, "to": 3e6}]},
        {"name": "normal_mean_std", "seed": 12,
         "steps": [{"op": "normal", "size": [100], "mean": 0.5, "std": 2.0},
                   {"op": "normal", "size": [15], "mean": 0.5, "std": 2.0},
                   {"op": "normal", "size": [33], "mean": -3.0, "std": 0.0}]},
        {"name": "randn_large", "seed": 13,
         "steps": [{"op": "randn", "size": [4099]}, {"op": "randn", "size": [65536]}]},
        {"name": "randint_ranges", "seed": 14,
         "steps": [{"op": "randint", "low": -7, "high": 1000, "size": [20]},
                   {"op": "randint", "low": -2**40, "high": 2**40, "size": [10]},
                   {"op": "randint", "low": 0, "high": 2**32, "size": [5]},
                   {"op": "randint", "low": 0, "high": 2**32 - 1, "size": [5]},
                   {"op": "randint", "low": -2**63, "high": 2**63 - 1, "size": [5]}]},
        {"name": "notebook002/randint_seed42", "seed": 42,
         "steps": [{"op": "randint", "low": 0, "high": 10, "size": [3, 2]}]},
        {"name": "embedding_blocks", "seed": 15,
         "steps": [{"op": "embedding", "num": 10, "dim": 8}]},
        # A seed above 2^32: only its low 32 bits matter.
        {"name": "seed_high_bits", "seed": 2**32 + 7,
         "steps": [{"op": "rand", "size": [4]}, {"op": "randn", "size": [4]}]},
    ]
    return out


def generate(capability):
    import torch
    assert torch.__version__.startswith("1.13"), torch.__version__
    golden = {"torch": torch.__version__, "capability": capability, "cases": []}
    for case in cases():
        torch.manual_seed(case["seed"])
        case["steps"] = [run_step(torch, dict(s)) for s in case["steps"]]
        golden["cases"].append(case)
    path = os.path.join(HERE, f"torch_{capability}.json")
    # One case per line: readable diffs without a very long file.
    with open(path, "w") as f:
        f.write('{"torch": %s, "capability": %s, "cases": [\n' % (
            json.dumps(golden["torch"]), json.dumps(capability)))
        f.write(",\n".join(json.dumps(c) for c in golden["cases"]))
        f.write("\n]}\n")
    print("wrote", path)


if __name__ == "__main__":
    if len(sys.argv) == 2:
        generate(sys.argv[1])
    else:
        for cap in ("avx2", "default"):
            env = dict(os.environ, ATEN_CPU_CAPABILITY=cap)
            subprocess.run([sys.executable, __file__, cap], env=env, check=True)
