#!/usr/bin/python3
"""Writes tensorio's golden files with NumPy (and PyTorch for bfloat16).

Run with Debian's interpreter, from anywhere:

    /usr/bin/python3 tensorio/testdata/gen.py

Every tensor holds values given by its index i in row-major order, so the Go
tests can rebuild them without reading another file:

    floats  i*0.25 - 1.5      (exact in float16 and bfloat16 too)
    int64, int32  i*3 - 7
    uint8   (i*37) % 256
    int8    (i*37) % 256 - 128
    bool    i % 3 == 0

NumPy writes the .npy and .npz files. Neither NumPy nor PyTorch 1.13 writes
.safetensors, so write_safetensors below lays the file out as the format's
reference implementation does (8-byte little-endian header length, compact
JSON header with __metadata__ first, tensors sorted by dtype alignment then
name, header padded with spaces to a multiple of 8).
"""
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def pattern(shape, dtype):
    """The golden values of a tensor of this shape and NumPy dtype."""
    n = int(np.prod(shape, dtype=np.int64))
    i = np.arange(n, dtype=np.int64)
    kind = np.dtype(dtype)
    if kind == np.bool_:
        v = i % 3 == 0
    elif kind.kind == "f":
        v = i * 0.25 - 1.5
    elif kind == np.uint8:
        v = (i * 37) % 256
    elif kind == np.int8:
        v = (i * 37) % 256 - 128
    else:
        v = i * 3 - 7
    return v.astype(dtype).reshape(shape)


def path(*parts):
    p = os.path.join(HERE, *parts)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    return p


def write_npy():
    good = {
        "f4_2x3": pattern((2, 3), "<f4"),
        "f8_3": pattern((3,), "<f8"),
        "i8_2x2": pattern((2, 2), "<i8"),
        "i4_4": pattern((4,), "<i4"),
        "u1_5": pattern((5,), "|u1"),
        "i1_5": pattern((5,), "|i1"),
        "b1_2x2": pattern((2, 2), "|b1"),
        "f4_scalar": pattern((), "<f4"),
        "f4_1": pattern((1,), "<f4"),
        "f4_2x1x3x2": pattern((2, 1, 3, 2), "<f4"),
        "f4_big_endian": pattern((2, 2), ">f4"),
        "f8_big_endian": pattern((3,), ">f8"),
        "i8_big_endian": pattern((3,), ">i8"),
    }
    for name, a in good.items():
        np.save(path("npy", name + ".npy"), a)
    for version in [(2, 0), (3, 0)]:
        with open(path("npy", "f4_2x3_v%d.npy" % version[0]), "wb") as f:
            np.lib.format.write_array(f, pattern((2, 3), "<f4"), version=version)
    # The other numeric types, zero elements and float16's specials, which
    # Arrays hold (ReadNPYArray); ReadNPY widens float16 to float32 and
    # refuses zero elements (bad_empty.npy).
    arrays = {
        "f2_2x3": pattern((2, 3), "<f2"),
        "f2_big_endian": pattern((3,), ">f2"),
        "f2_specials": np.array([np.nan, np.inf, -np.inf, 2**-24, 65504, -0.0], dtype="<f2"),
        "i2_4": pattern((4,), "<i2"),
        "u2_4": pattern((4,), "<u2"),
        "u4_4": pattern((4,), "<u4"),
        "u8_3": pattern((3,), "<u8"),
        "i8_0": np.zeros((0,), dtype="<i8"),
        "f2_2x0x3": np.zeros((2, 0, 3), dtype="<f2"),
    }
    for name, a in arrays.items():
        np.save(path("npy", name + ".npy"), a)
    # Valid NumPy files this package refuses, each with a clear error.
    np.save(path("npy", "bad_complex.npy"), np.zeros(2, dtype="<c8"))
    np.save(path("npy", "bad_fortran.npy"), np.asfortranarray(pattern((2, 3), "<f4")))
    np.save(path("npy", "bad_structured.npy"), np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
    np.save(path("npy", "bad_object.npy"), np.array([1, "x"], dtype=object), allow_pickle=True)
    np.save(path("npy", "bad_empty.npy"), np.zeros((0, 3), dtype="<f4"))


def npz_members():
    return {
        "W_query.weight": pattern((2, 3), "<f4"),
        "steps": pattern((4,), "<i8"),
        "mask": pattern((2, 2), "|b1"),
        "scale": pattern((), "<f8"),
        "heads.0.bias": pattern((3,), "<f4"),
    }


def write_npz():
    np.savez(path("npz", "stored.npz"), **npz_members())
    np.savez_compressed(path("npz", "deflated.npz"), **npz_members())


def write_safetensors(file, tensors, metadata=None):
    """Writes {name: (dtype name, shape, raw little-endian bytes)}."""
    order = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16",
             "I32", "U32", "F32", "F64", "I64", "U64"]
    items = sorted(tensors.items(), key=lambda kv: (-order.index(kv[1][0]), kv[0]))
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = dict(sorted(metadata.items()))
    for name, (dtype, shape, raw) in items:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(file, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, (_, _, raw) in items:
            f.write(raw)


def st_tensor(dtype, shape):
    """A pattern tensor as (safetensors dtype, shape, raw bytes)."""
    numpy_type = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "I32": "<i4",
                  "I8": "|i1", "U8": "|u1", "BOOL": "|b1", "F16": "<f2"}
    if dtype == "BF16":
        import torch
        t = torch.from_numpy(pattern(shape, "<f4")).to(torch.bfloat16)
        return dtype, shape, t.view(torch.int16).numpy().astype("<i2").tobytes()
    return dtype, shape, pattern(shape, numpy_type[dtype]).tobytes()


def write_safetensors_goldens():
    writable = {
        "f32": st_tensor("F32", (2, 3)),
        "f64": st_tensor("F64", (3,)),
        "i64": st_tensor("I64", (2, 2)),
        "i32": st_tensor("I32", (4,)),
        "i8": st_tensor("I8", (5,)),
        "u8": st_tensor("U8", (5,)),
        "bool": st_tensor("BOOL", (2, 2)),
        "scalar": st_tensor("F32", ()),
        "rank4": st_tensor("F32", (2, 1, 3, 2)),
        "a.weight": st_tensor("F32", (1,)),
    }
    meta = {"format": "pt", "source": "tensorio/testdata/gen.py"}
    write_safetensors(path("safetensors", "writable.safetensors"), writable, meta)
    halves = dict(writable, f16=st_tensor("F16", (2, 3)), bf16=st_tensor("BF16", (2, 3)))
    write_safetensors(path("safetensors", "all_dtypes.safetensors"), halves, meta)

    # Half-precision edge values and what PyTorch converts them to.
    import torch
    specials = [0.0, -0.0, 1.0, -2.5, 65504.0, 6.103515625e-05, 5.960464477539063e-08,
                1.0 / 3.0, float("inf"), float("-inf"), float("nan"), 3.0e38]
    f16 = torch.tensor(specials[:-1], dtype=torch.float16)
    bf16 = torch.tensor(specials, dtype=torch.bfloat16)
    write_safetensors(path("safetensors", "half_specials.safetensors"), {
        "f16": ("F16", tuple(f16.shape), f16.view(torch.int16).numpy().astype("<i2").tobytes()),
        "bf16": ("BF16", tuple(bf16.shape), bf16.view(torch.int16).numpy().astype("<i2").tobytes()),
    })
    np.savez(path("safetensors", "half_specials_float32.npz"),
             f16=f16.float().numpy(), bf16=bf16.float().numpy())


if __name__ == "__main__":
    write_npy()
    write_npz()
    write_safetensors_goldens()
    print("wrote goldens under", HERE)
