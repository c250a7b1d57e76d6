"""Writes print.json: tensors and the text PyTorch prints for them.

Run with Debian's PyTorch: /usr/bin/python3 torch_print.py
The Go test (print_test.go) formats the same values and compares the text.
Every case targets one of PyTorch's printing rules (torch/_tensor_str.py):
four decimals, "2." for integral floats, scientific notation, the width
shared by all elements, line wrapping at 80 columns, summarizing with
"..." above 1000 elements, dtype suffixes, and non-finite values.
"""
import json
import math

import torch

torch.manual_seed(0)
cases = []


def encode(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def add(name, t):
    cases.append({
        "name": name,
        "dtype": str(t.dtype).replace("torch.", ""),
        "shape": list(t.shape),
        "data": [encode(v) for v in t.reshape(-1).tolist()],
        "text": str(t),
    })


inf, nan = float("inf"), float("nan")
add("vector", torch.tensor([0.1385, 0.2379]))
add("scalar", torch.tensor(0.9544))
add("integral floats", torch.tensor([[2.0, 7.0], [6.0, 4.0]]))
add("negatives pad", torch.tensor([[-0.0739, 0.0713]]))
add("masked", torch.tensor([[0.9231, -inf], [1.2705, 1.8524]]))
add("batch", torch.tensor([[[1.5, 2.0]], [[3.0, 4.0]]]))
add("scientific small", torch.tensor([1e-5, 1.0]))
add("scientific ratio", torch.tensor([0.001, 2.0, 30.0]))
add("scientific large", torch.tensor([1.5e9, -2.0]))
add("integral ratio", torch.tensor([1.0, 2000.0]))
add("integral large", torch.tensor([3.0, 2e8]))
add("integral with inf", torch.tensor([[1.0, -inf], [2.0, 3.0]]))
add("nan and inf", torch.tensor([nan, inf, -inf, 0.5]))
add("only nonfinite", torch.tensor([nan, -inf]))
add("zeros", torch.zeros(2, 3))
add("negative zero", torch.tensor([-0.0, 1.5]))
add("rounding", torch.tensor([0.00005, 0.12345, 0.99995, 1.00005]))
add("wide row", torch.randn(2, 20))
add("wide vector", torch.randn(30))
add("wide integral", torch.arange(40, dtype=torch.float32))
add("four dims", torch.randn(2, 2, 2, 3))
add("summarized vector", torch.randn(1200))
add("summarized matrix", torch.randn(40, 30))
add("summarized batch", torch.randn(8, 16, 12))
add("summarized short rows", torch.randn(500, 3))
add("summarized sci", torch.cat([torch.randn(1001), torch.tensor([1e-6])]))
add("float64", torch.tensor([[0.5, -1.25], [3.0, 4.125]], dtype=torch.float64))
add("float64 precise", torch.tensor([1 / 3, 2 / 3], dtype=torch.float64))
add("float64 suffix wraps", torch.randn(8, dtype=torch.float64))
add("float64 matrix suffix", torch.randn(3, 8, dtype=torch.float64))
add("empty float64", torch.zeros(2, 0, dtype=torch.float64))
add("int64", torch.tensor([[1, -20], [300, 4]]))
add("int64 wide", torch.arange(-20, 20))
add("int32", torch.tensor([1, 2, 3], dtype=torch.int32))
add("uint8", torch.tensor([0, 255], dtype=torch.uint8))
add("int64 summarized", torch.arange(2000).reshape(40, 50))
add("bool", torch.tensor([[True, False], [False, True]]))
add("empty", torch.zeros(0))
add("empty matrix", torch.zeros(0, 3))
add("scalar int", torch.tensor(7))
add("scalar nan", torch.tensor(nan))
add("single", torch.tensor([[[0.25]]]))
# Every dtype PyTorch 1.13 prints, as the CLI prints ONNX outputs of any
# type (appended last, so the random cases above keep their values).
add("float16", torch.tensor([[1.5, 2.25], [-0.0999, 65504.0]], dtype=torch.float16))
add("float16 nan scalar", torch.tensor(nan, dtype=torch.float16))
add("float16 summarized", torch.randn(1500).to(torch.float16))
add("bfloat16", torch.tensor([1.5, 0.1, -3.0], dtype=torch.bfloat16))
add("bfloat16 integral", torch.tensor([448.0, 2.0], dtype=torch.bfloat16))
add("int8", torch.tensor([[1, 2], [3, -4]], dtype=torch.int8))
add("int16 scalar", torch.tensor(5, dtype=torch.int16))
add("int32 widths", torch.tensor([1, -20, 300], dtype=torch.int32))
add("int32 summarized", torch.arange(-600, 600, dtype=torch.int32))
add("int64 extremes", torch.tensor([-(2**63), 2**63 - 1]))
add("bool scalar", torch.tensor(True))
add("bool column", torch.tensor([[True], [False]]))
add("bool summarized", torch.arange(1100) % 3 == 0)
add("empty int64", torch.zeros(0, dtype=torch.int64))
add("empty int32 matrix", torch.zeros(0, 3, dtype=torch.int32))
add("empty float16 matrix", torch.zeros(0, 3, dtype=torch.float16))
add("empty bool", torch.zeros(2, 0, dtype=torch.bool))
add("uint8 summarized", (torch.arange(1200) % 256).to(torch.uint8))

with open("print.json", "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, separators=(",", ":"))
    f.write("\n")
