"""Writes small ONNX models of the Attention (opsets 23 and 24) and
RotaryEmbedding (opset 23) operators, with seeded random inputs, for ONNX
Runtime to run (run_cases.mjs) and attnrun's executor to be checked against.

Usage (Debian's python3-onnx 1.12, which predates opset 23: the models are
built with onnx.helper, the opset is stamped by hand and onnx.checker is
not run):

    /usr/bin/python3 testdata/ort/attention_cases.py --out DIR [--seed N]

DIR/<case>/model.onnx and DIR/<case>/test_data_set_0/input_K.pb for every
case; the cases where ONNX Runtime 1.30 is known to disagree with the ONNX
specification go to DIR/differs/<case>; DIR/manifest.json lists every case
with what it covers and, for the disagreements, what differs. Seed 0 writes
the committed cases (onnxio/exec/testdata/attention).
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# IR version per opset: ONNX 1.18 introduced opset 23 with IR 11, ONNX 1.19
# opset 24 with IR 12.
IR_VERSION = {23: 11, 24: 12}

ATTN_INPUTS = ["Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"]
ATTN_OUTPUTS = ["Y", "present_key", "present_value", "qk_matmul_output"]


class Case:
    """One model with its inputs."""

    def __init__(self, name, covers, op, opset, attrs, inputs, outputs, differs=None):
        self.name, self.covers, self.op, self.opset = name, covers, op, opset
        self.attrs = attrs
        self.inputs = inputs  # [(name, array or None)] in the operator's input order
        self.outputs = outputs  # operator output names, "" for omitted ones
        self.differs = differs

    def model(self):
        node_inputs = [n if a is not None else "" for n, a in self.inputs]
        while node_inputs and node_inputs[-1] == "":
            node_inputs.pop()
        node = helper.make_node(self.op, node_inputs, self.outputs, name=self.op.lower(), **self.attrs)
        graph_inputs = [
            helper.make_tensor_value_info(n, numpy_helper.from_array(a).data_type, a.shape)
            for n, a in self.inputs
            if a is not None
        ]
        # Outputs are float32 of any shape: the shapes are what the checks are about.
        graph_outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in self.outputs if o]
        graph = helper.make_graph([node], self.name, graph_inputs, graph_outputs)
        model = helper.make_model(
            graph,
            producer_name="attnrun testdata/ort/attention_cases.py",
            opset_imports=[helper.make_opsetid("", self.opset)],
        )
        model.ir_version = IR_VERSION[self.opset]
        return model

    def write(self, root):
        folder = os.path.join(root, "differs" if self.differs else "", self.name)
        data = os.path.join(folder, "test_data_set_0")
        os.makedirs(data)
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(self.model().SerializeToString())
        present = [(n, a) for n, a in self.inputs if a is not None]
        for k, (n, a) in enumerate(present):
            with open(os.path.join(data, f"input_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a, n).SerializeToString())

    def manifest(self):
        entry = {"name": self.name, "op": self.op, "opset": self.opset, "covers": self.covers}
        if self.differs:
            entry["differs"] = self.differs
        return entry


class Generator:
    """Builds the cases from one seeded generator, in a fixed order."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.cases = []

    def normal(self, *shape, scale=1.0):
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    def float_mask(self, *shape, neginf=0.0):
        """Random additive mask; with neginf > 0 that fraction of entries is
        -inf, but never column 0, so that no row is fully masked."""
        m = self.normal(*shape)
        if neginf:
            m[self.rng.random(shape) < neginf] = -np.inf
            m[..., 0] = self.normal(*shape[:-1])
        return m

    def bool_mask(self, *shape):
        """Random boolean mask (True attends) with column 0 always True, so
        that no row is fully masked even under a causal frontier."""
        m = self.rng.random(shape) < 0.6
        m[..., 0] = True
        return m

    def attention(self, name, covers, *, opset=23, rank=4, B=2, Hq=2, Hkv=2, Sq=3, Skv=5, D=4, Dv=3,
                  P=0, mask=None, nonpad=None, attrs=None, outputs=("Y",), q_scale=1.0, differs=None):
        """An Attention case. mask is a function of the generator and the
        full bias shape (B, Hq, Sq, total) returning the attn_mask array."""
        attrs = dict(attrs or {})
        if rank == 3:
            attrs.setdefault("q_num_heads", Hq)
            attrs.setdefault("kv_num_heads", Hkv)
            q = self.normal(B, Sq, Hq * D, scale=q_scale)
            k = self.normal(B, Skv, Hkv * D)
            v = self.normal(B, Skv, Hkv * Dv)
        else:
            q = self.normal(B, Hq, Sq, D, scale=q_scale)
            k = self.normal(B, Hkv, Skv, D)
            v = self.normal(B, Hkv, Skv, Dv)
        past_k = self.normal(B, Hkv, P, D) if P else None
        past_v = self.normal(B, Hkv, P, Dv) if P else None
        m = mask(self, (B, Hq, Sq, P + Skv)) if mask else None
        np_ = np.array(nonpad, dtype=np.int64) if nonpad is not None else None
        values = [q, k, v, m, past_k, past_v, np_]
        node_outputs = [o if o in outputs else "" for o in ATTN_OUTPUTS]
        while node_outputs[-1] == "":
            node_outputs.pop()
        self.cases.append(Case(name, covers, "Attention", opset, attrs,
                               list(zip(ATTN_INPUTS, values)), node_outputs, differs))

    def rotary(self, name, covers, *, rank=4, B=2, H=2, S=3, D=8, dim=0, positions=True, interleaved=0):
        """A RotaryEmbedding case with real RoPE tables (base 10000)."""
        half = (dim or D) // 2
        x = self.normal(B, H, S, D) if rank == 4 else self.normal(B, S, H * D)
        inv_freq = 10000.0 ** (-np.arange(half) / half)
        if positions:
            max_pos = 8
            pos = self.rng.integers(0, max_pos, size=(B, S)).astype(np.int64)
            angles = np.arange(max_pos)[:, None] * inv_freq[None, :]
        else:
            pos = None
            start = self.rng.integers(0, 5, size=(B, 1))
            angles = (start + np.arange(S)[None, :])[:, :, None] * inv_freq[None, None, :]
        cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
        attrs = {"interleaved": interleaved}
        if dim:
            attrs["rotary_embedding_dim"] = dim
        if rank == 3:
            attrs["num_heads"] = H
        inputs = [("X", x), ("cos_cache", cos), ("sin_cache", sin), ("position_ids", pos)]
        self.cases.append(Case(name, covers, "RotaryEmbedding", 23, attrs, inputs, ["Y"]))


def build(seed):
    g = Generator(seed)
    att, rot = g.attention, g.rotary
    fmask = lambda *axes, neginf=0.0: lambda g, full: g.float_mask(*[full[a] if a >= 0 else 1 for a in axes], neginf=neginf)
    bmask = lambda *axes: lambda g, full: g.bool_mask(*[full[a] if a >= 0 else 1 for a in axes])
    qk = ("Y", "qk_matmul_output")
    cache = ("Y", "present_key", "present_value")

    # Layouts, head counts, scale.
    att("attn23_4d", "4-D Q/K/V, V head size differs from Q/K, default scale")
    att("attn23_3d", "3-D Q/K/V with q_num_heads = kv_num_heads = 2", rank=3)
    att("attn23_4d_gqa", "4-D grouped-query attention, 4 query heads on 2 KV heads", Hq=4)
    att("attn23_3d_gqa_present", "3-D GQA (6 on 2 heads), present_key/value without a past", rank=3, Hq=6, outputs=cache)
    att("attn23_4d_mqa", "4-D multi-query attention, 3 query heads on 1 KV head", Hq=3, Hkv=1)
    att("attn23_3d_mqa", "3-D multi-query attention, 4 on 1 heads", rank=3, Hq=4, Hkv=1)
    att("attn23_scale", "explicit scale 0.25", attrs={"scale": 0.25})
    att("attn23_long_heads", "head size 64, 40 keys (several kernel panels)", B=1, Sq=7, Skv=40, D=64, Dv=64)

    # Causal masking and the KV cache.
    att("attn23_causal", "is_causal with as many queries as keys", Sq=4, Skv=4, attrs={"is_causal": 1})
    att("attn23_causal_short_queries", "is_causal, 2 queries on 5 keys, no past: aligned top-left", Sq=2, Skv=5, attrs={"is_causal": 1})
    att("attn23_causal_long_queries", "is_causal, 5 queries on 3 keys, no past", Sq=5, Skv=3, attrs={"is_causal": 1})
    att("attn23_past_present", "past_key/value appended, present_key/value out", P=4, Sq=2, Skv=2, outputs=cache)
    att("attn23_past_causal", "is_causal with a past of 3: offset 3", P=3, Sq=2, Skv=2, attrs={"is_causal": 1}, outputs=cache)
    att("attn23_past_causal_decode_gqa", "one-token decode with a past of 5, causal, GQA", P=5, Sq=1, Skv=1, Hq=4,
        attrs={"is_causal": 1}, outputs=cache)
    att("attn23_past_causal_3d_gqa", "3-D GQA with past and is_causal", rank=3, Hq=4, P=3, Sq=2, Skv=2,
        attrs={"is_causal": 1}, outputs=cache)
    att("attn23_past_causal_unequal", "is_causal with past 2, 3 queries on 2 new keys", P=2, Sq=3, Skv=2,
        attrs={"is_causal": 1}, outputs=cache)

    # Masks and their broadcasting to (batch, q_heads, q_len, total).
    att("attn23_mask_float_2d", "float mask (q_len, total)", mask=fmask(2, 3))
    att("attn23_mask_float_3d_heads", "float mask (q_heads, q_len, total)", mask=fmask(1, 2, 3))
    att("attn23_mask_float_3d_one", "float mask (1, q_len, total)", mask=fmask(-1, 2, 3))
    att("attn23_mask_float_4d", "float mask (batch, q_heads, q_len, total)", mask=fmask(0, 1, 2, 3))
    att("attn23_mask_float_4d_batch", "float mask (batch, 1, q_len, total)", mask=fmask(0, -1, 2, 3))
    att("attn23_mask_float_4d_heads", "float mask (1, q_heads, q_len, total), GQA", Hq=4, mask=fmask(-1, 1, 2, 3))
    att("attn23_mask_float_neginf", "float mask with -inf entries", mask=fmask(0, -1, 2, 3, neginf=0.3))
    att("attn23_mask_bool_2d", "bool mask (q_len, total), true attends", mask=bmask(2, 3))
    att("attn23_mask_bool_4d", "bool mask (batch, q_heads, q_len, total)", mask=bmask(0, 1, 2, 3))
    att("attn23_mask_bool_3d_gqa", "bool mask (q_heads, q_len, total), GQA", Hq=4, mask=bmask(1, 2, 3))
    att("attn23_mask_bool_causal", "bool mask and is_causal together", Sq=4, Skv=4, mask=bmask(0, -1, 2, 3),
        attrs={"is_causal": 1})
    att("attn23_mask_float_causal_gqa", "float mask, is_causal, GQA", Hq=4, Sq=4, Skv=4, mask=fmask(2, 3),
        attrs={"is_causal": 1})
    att("attn23_mask_past", "float mask over past and new keys", P=3, Sq=2, Skv=2, mask=fmask(2, 3), outputs=cache)
    att("attn23_mask_bool_past_causal_3d", "3-D, bool mask, past and is_causal", rank=3, P=3, Sq=2, Skv=2,
        mask=bmask(0, -1, 2, 3), attrs={"is_causal": 1}, outputs=cache)

    # Softcap and the qk_matmul_output modes.
    att("attn23_softcap", "softcap 2 on large scores", q_scale=3, attrs={"softcap": 2.0})
    att("attn23_softcap_mask_causal", "softcap before a -inf float mask and is_causal", Sq=4, Skv=4, q_scale=3,
        mask=fmask(2, 3, neginf=0.3), attrs={"softcap": 1.5, "is_causal": 1})
    att("attn23_qk_mode0", "qk_matmul_output mode 0: scaled scores (softcap, bool mask, causal set)", Sq=4, Skv=4,
        q_scale=3, mask=bmask(2, 3), attrs={"softcap": 2.0, "is_causal": 1, "qk_matmul_output_mode": 0}, outputs=qk)
    att("attn23_qk_mode1", "qk_matmul_output mode 1: after softcap", Sq=4, Skv=4, q_scale=3, mask=bmask(2, 3),
        attrs={"softcap": 2.0, "is_causal": 1, "qk_matmul_output_mode": 1}, outputs=qk)
    att("attn23_qk_mode2", "qk_matmul_output mode 2: after softcap and a float mask", q_scale=3, mask=fmask(0, 1, 2, 3),
        attrs={"softcap": 2.0, "qk_matmul_output_mode": 2}, outputs=qk)
    att("attn23_qk_mode3", "qk_matmul_output mode 3: the softmax weights", Sq=4, Skv=4, q_scale=3, mask=bmask(2, 3),
        attrs={"softcap": 2.0, "is_causal": 1, "qk_matmul_output_mode": 3}, outputs=qk)
    att("attn23_qk_default_mode", "qk_matmul_output without the mode attribute (0)", outputs=qk)
    att("attn23_qk_mode3_past_3d_gqa", "mode 3 with 3-D GQA, past and is_causal", rank=3, Hq=4, P=3, Sq=2, Skv=2,
        attrs={"is_causal": 1, "qk_matmul_output_mode": 3}, outputs=ATTN_OUTPUTS)
    att("attn23_qk_mode2_past", "mode 2 with a float mask over past and new keys", P=2, Sq=2, Skv=3,
        mask=fmask(2, 3), attrs={"qk_matmul_output_mode": 2}, outputs=ATTN_OUTPUTS)

    # Rows that can see no key give zeros (ONNX errata, ONNX Runtime too).
    def full_false_row(g, full):
        m = g.bool_mask(full[2], full[3])
        m[1, :] = False
        return m

    def full_neginf_row(g, full):
        m = g.float_mask(full[0], 1, full[2], full[3])
        m[0, 0, 2, :] = -np.inf
        return m

    att("attn23_fully_masked_bool", "an all-false bool mask row: zeros in Y and in mode 3", mask=full_false_row,
        attrs={"qk_matmul_output_mode": 3}, outputs=qk)
    att("attn23_fully_masked_float", "an all -inf float mask row: zeros in Y (fused kernel)", mask=full_neginf_row)
    att("attn23_softmax_precision_float", "softmax_precision float32", attrs={"softmax_precision": TensorProto.FLOAT})
    att("attn23_softmax_precision_double", "softmax_precision float64, mode 3",
        attrs={"softmax_precision": TensorProto.DOUBLE, "qk_matmul_output_mode": 3}, outputs=qk)

    # Opset 24: nonpad_kv_seqlen (an external, padded KV cache).
    att("attn24_4d", "opset 24, 4-D, no new input", opset=24)
    att("attn24_3d_past_causal", "opset 24, 3-D with past and is_causal", opset=24, rank=3, P=2, Sq=2, Skv=2,
        attrs={"is_causal": 1}, outputs=cache)
    att("attn24_nonpad", "nonpad_kv_seqlen [3, 5] on 5 keys", opset=24, nonpad=[3, 5])
    att("attn24_nonpad_mask_float", "nonpad_kv_seqlen with a float mask", opset=24, Skv=6, nonpad=[4, 6],
        mask=fmask(0, -1, 2, 3))
    att("attn24_nonpad_mask_bool", "nonpad_kv_seqlen with a bool mask", opset=24, Skv=6, nonpad=[2, 5],
        mask=bmask(2, 3))
    att("attn24_nonpad_causal_prefill", "nonpad_kv_seqlen and is_causal: offset nonpad - q_len", opset=24, Sq=2,
        Skv=6, nonpad=[4, 6], attrs={"is_causal": 1})
    att("attn24_nonpad_causal_decode_gqa", "one-token decode on an external cache, GQA", opset=24, Hq=4, Sq=1, Skv=6,
        nonpad=[6, 3], attrs={"is_causal": 1})
    att("attn24_nonpad_causal_mask_bool", "nonpad_kv_seqlen, is_causal and a bool mask together", opset=24, Sq=3,
        Skv=6, nonpad=[4, 5], mask=bmask(0, -1, 2, 3), attrs={"is_causal": 1})
    att("attn24_nonpad_3d_present", "3-D with nonpad_kv_seqlen, present outputs", opset=24, rank=3, Hq=4, Skv=5,
        nonpad=[2, 4], outputs=cache)
    att("attn24_nonpad_qk_mode3", "nonpad_kv_seqlen with mode 3", opset=24, nonpad=[3, 4],
        attrs={"qk_matmul_output_mode": 3}, outputs=qk)
    att("attn24_nonpad_qk_mode1_softcap", "nonpad_kv_seqlen with softcap, mode 1", opset=24, nonpad=[3, 4], q_scale=3,
        attrs={"softcap": 1.0, "qk_matmul_output_mode": 1}, outputs=qk)
    att("attn24_nonpad_causal_negative_offset", "nonpad_kv_seqlen 2 < 4 queries, causal: rows 0 and 1 see nothing",
        opset=24, B=1, Sq=4, Skv=4, nonpad=[2], attrs={"is_causal": 1})
    att("attn24_fully_masked_qk_mode3", "opset 24, all-false bool mask row, mode 3", opset=24, mask=full_false_row,
        attrs={"qk_matmul_output_mode": 3}, outputs=qk)

    # RotaryEmbedding (opset 23).
    rot("rope_4d_positions", "4-D input, position_ids, halves rotated (GPT-NeoX/Llama)")
    rot("rope_4d_positions_interleaved", "4-D, position_ids, interleaved pairs (GPT-J)", interleaved=1)
    rot("rope_3d_positions", "3-D input with num_heads, position_ids", rank=3)
    rot("rope_3d_positions_interleaved", "3-D, position_ids, interleaved", rank=3, interleaved=1)
    rot("rope_4d_caches", "4-D, caches (batch, seq, dim/2) without position_ids", positions=False)
    rot("rope_3d_caches_interleaved", "3-D, caches without position_ids, interleaved", rank=3, positions=False,
        interleaved=1)
    rot("rope_partial", "partial rotary: rotary_embedding_dim 4 of head size 8", dim=4)
    rot("rope_partial_3d_interleaved", "partial rotary, 3-D, interleaved", rank=3, dim=4, interleaved=1)

    # Where ONNX Runtime 1.30 and the specification disagree.
    sentinel = ("ONNX Runtime writes the lowest float32 (-3.4028235e38) where the specification has -inf, "
                "for keys masked by the causal frontier, a bool mask or nonpad_kv_seqlen")
    def some_false(g, full):
        m = g.bool_mask(full[2], full[3])
        m[0, -1] = False
        return m

    att("attn23_qk_mode2_bool_mask", "qk_matmul_output mode 2 with a bool mask", mask=some_false,
        attrs={"qk_matmul_output_mode": 2}, outputs=qk, differs="mode2-sentinel: " + sentinel)
    att("attn23_qk_mode2_causal", "qk_matmul_output mode 2 with is_causal", Sq=4, Skv=4,
        attrs={"qk_matmul_output_mode": 2, "is_causal": 1}, outputs=qk, differs="mode2-sentinel: " + sentinel)
    att("attn24_qk_mode2_nonpad", "qk_matmul_output mode 2 with nonpad_kv_seqlen", opset=24, nonpad=[2, 4],
        attrs={"qk_matmul_output_mode": 2}, outputs=qk, differs="mode2-sentinel: " + sentinel)
    ignores = ("ONNX Runtime ignores softmax_precision; the executor rounds the scores and the weights to it, "
               "as the specification's Cast-Softmax-Cast does")
    att("attn23_softmax_precision_float16", "softmax_precision float16", q_scale=2,
        attrs={"softmax_precision": TensorProto.FLOAT16, "qk_matmul_output_mode": 3}, outputs=qk,
        differs="softmax-precision: " + ignores)
    att("attn23_softmax_precision_bfloat16", "softmax_precision bfloat16", q_scale=2,
        attrs={"softmax_precision": TensorProto.BFLOAT16, "qk_matmul_output_mode": 3}, outputs=qk,
        differs="softmax-precision: " + ignores)
    return g.cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder to write (replaced)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random inputs (0 for the committed cases)")
    args = ap.parse_args()
    cases = build(args.seed)
    tmp = args.out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for c in cases:
        c.write(tmp)
    manifest = {
        "generator": "testdata/ort/attention_cases.py",
        "seed": args.seed,
        "reference": "ONNX Runtime 1.30.0 (onnxruntime-node, CPU), outputs written by testdata/ort/run_cases.mjs",
        "cases": [c.manifest() for c in cases],
    }
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    shutil.rmtree(args.out, ignore_errors=True)
    os.rename(tmp, args.out)
    print(f"{len(cases)} cases written to {args.out} (seed {args.seed})", file=sys.stderr)


if __name__ == "__main__":
    main()
