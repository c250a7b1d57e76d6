"""Writes the float16/bfloat16 rounding goldens of array/half_test.go.

half.bin holds little-endian records (float32 bits, numpy float16 bits,
torch bfloat16 bits) for float32 values chosen to exercise every rounding
path: random bit patterns over the whole float32 range, values near
binary16's subnormal, normal and overflow boundaries, exact ties, and the
specials. Run with /usr/bin/python3 (numpy 1.24, torch 1.13).
"""
import struct

import numpy as np
import torch

rng = np.random.default_rng(12)
values = [rng.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32)]
# Around every binary16 binade, and exactly between neighbours (ties).
for e in range(-26, 17):
    base = np.float32(2.0) ** e
    step = base / np.float32(1024)
    ks = rng.integers(0, 1024, 20).astype(np.float32)
    for k in ks:
        for frac in (0.0, 0.25, 0.5, 0.75, 0.5 + 2**-12):
            x = np.float32(base + (k + np.float32(frac)) * step)
            values.append(np.array([x, -x], dtype=np.float32).view(np.uint32))
edges = [0.0, -0.0, 65504, 65519.996, 65520, 65536, 1e5, 2**-24, 2**-25, 1.5 * 2**-25,
         2**-25 * 0.999, 6.097555e-05, 6.1035156e-05, 3.3895314e38, 3.4028235e38,
         float("inf"), -float("inf"), 1e-45, 1.4e-45, 1.1754942e-38, 0.1, 1 / 3]
values.append(np.array(edges, dtype=np.float32).view(np.uint32))
values.append(np.array([0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FA00000], dtype=np.uint32))
bits = np.unique(np.concatenate(values))
f32 = bits.view(np.float32)
h = f32.astype(np.float16).view(np.uint16)
with torch.no_grad():
    bf = torch.from_numpy(f32.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
with open("half.bin", "wb") as f:
    for b, x, y in zip(bits, h, bf):
        f.write(struct.pack("<IHH", int(b), int(x), int(y)))
print(len(bits), "values")
