"""Writes small ONNX models of LinearAttention (opset 27), SwiGLU (opset 28)
and ai.onnx.preview FlexAttention, with seeded random inputs and the
outputs PyTorch computes for them, for attnrun's executor to be checked
against with Go alone (TestFrontierCases).

The references follow the ONNX specification of each operator written out
in PyTorch, in float64 (outputs rounded to the model's element type):

- LinearAttention: the recurrence token by token (the operator's defining
  semantics, and the form of Hugging Face's torch_recurrent_gated_delta_rule),
  with GQA, per-head and per-key decay, per-head and shared beta, a past
  state and an explicit scale;
- FlexAttention: softmax(score_mod(scale * Q K^T)) then prob_mod, times V,
  with the modifiers' graphs written out as the same torch functions;
- SwiGLU: a * sigmoid(alpha * a) * b.

PyTorch 1.13 cannot export these operators and Debian's ONNX 1.12 predates
them, so the models are built with onnx.helper (opsets stamped by hand,
onnx.checker not run). Several FlexAttention cases read values of the main
graph from inside score_mod and prob_mod (outer-scope captures).

Usage (from the repository root; re-running leaves git clean):

    /usr/bin/python3 testdata/torch/frontier_cases.py --out onnxio/exec/testdata/frontier

DIR/<case>/model.onnx, DIR/<case>/test_data_set_0/{input,output}_K.pb and
DIR/manifest.json (what each case covers).
"""

import argparse
import json
import math
import os
import shutil

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 13  # what ONNX's own node tests of these opsets use
PREVIEW = "ai.onnx.preview"


def tensor_info(name, a):
    return helper.make_tensor_value_info(name, numpy_helper.from_array(a).data_type, a.shape)


def t64(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


class Case:
    """One model with its inputs and PyTorch's outputs."""

    def __init__(self, name, covers, nodes, inputs, outputs, opsets, initializers=()):
        self.name, self.covers = name, covers
        self.nodes = nodes
        self.inputs = inputs  # [(name, array)]
        self.outputs = outputs  # [(name, array)]
        self.opsets = opsets  # {domain: version}
        self.initializers = list(initializers)

    def model(self):
        graph = helper.make_graph(
            self.nodes, self.name,
            [tensor_info(n, a) for n, a in self.inputs],
            [tensor_info(n, a) for n, a in self.outputs],
            initializer=self.initializers,
        )
        model = helper.make_model(
            graph,
            producer_name="attnrun testdata/torch/frontier_cases.py",
            opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(self.opsets.items())],
        )
        model.ir_version = IR_VERSION
        return model

    def write(self, root):
        folder = os.path.join(root, self.name)
        data = os.path.join(folder, "test_data_set_0")
        os.makedirs(data)
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(self.model().SerializeToString())
        for kind, values in (("input", self.inputs), ("output", self.outputs)):
            for k, (n, a) in enumerate(values):
                with open(os.path.join(data, f"{kind}_{k}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(a, n).SerializeToString())

    def manifest(self):
        ops = sorted({(n.domain + "." if n.domain else "") + n.op_type for n in self.nodes})
        return {"name": self.name, "ops": ops, "covers": self.covers}


class Generator:
    """Builds the cases from one seeded generator, in a fixed order."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.cases = []

    def normal(self, *shape, scale=1.0, dtype=np.float32):
        return (self.rng.standard_normal(shape) * scale).astype(dtype)

    # LinearAttention

    def linear_attention(self, name, covers, rule, *, B=2, T=5, Hq=2, Hkv=2, dk=3, dv=4, past=True,
                         decay="per_key", beta="per_head", scale=None, dtype=np.float32):
        q = self.normal(B, T, Hq * dk, dtype=dtype)
        k = self.normal(B, T, Hkv, dk)
        k = (k / np.linalg.norm(k, axis=-1, keepdims=True)).reshape(B, T, Hkv * dk).astype(dtype)  # L2-normalized keys
        v = self.normal(B, T, Hkv * dv, dtype=dtype)
        s0 = self.normal(B, Hkv, dk, dv, scale=0.5, dtype=dtype) if past else None
        gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
        g = None
        if gated:  # log-space decay in (-1, 0): exp(g) in (0.37, 1)
            width = Hkv * dk if decay == "per_key" else Hkv
            g = -self.rng.random((B, T, width)).astype(dtype)
        b = None
        if delta:  # a sigmoid output
            width = Hkv if beta == "per_head" else 1
            b = (1 / (1 + np.exp(-self.rng.standard_normal((B, T, width))))).astype(dtype)
        out, state = linear_attention_ref(q, k, v, s0, g, b, Hq, Hkv, rule, scale)
        inputs = [("query", q), ("key", k), ("value", v), ("past_state", s0), ("decay", g), ("beta", b)]
        node_inputs = [n if a is not None else "" for n, a in inputs]
        while node_inputs[-1] == "":
            node_inputs.pop()
        attrs = {"q_num_heads": Hq, "kv_num_heads": Hkv, "update_rule": rule}
        if scale is not None:
            attrs["scale"] = scale
        node = helper.make_node("LinearAttention", node_inputs, ["output", "present_state"], name="linear_attention", **attrs)
        self.cases.append(Case(name, covers, [node], [(n, a) for n, a in inputs if a is not None],
                               [("output", out.astype(dtype)), ("present_state", state.astype(dtype))], {"": 27}))

    # FlexAttention

    def flex_attention(self, name, covers, *, B=2, Hq=2, Hkv=2, L=3, S=5, E=4, Ev=4, dtype=np.float32,
                       scale=None, softmax_precision=None, score_mod=None, prob_mod=None, extra=(), initializers=()):
        """score_mod and prob_mod are (graph, torch function of the tensor and
        the extra inputs by name); extra are main-graph inputs the modifier
        graphs read from the outer scope."""
        q = self.normal(B, Hq, L, E, dtype=dtype)
        k = self.normal(B, Hkv, S, E, dtype=dtype)
        v = self.normal(B, Hkv, S, Ev, dtype=dtype)
        outer = {n: t64(a) if a.dtype != bool else torch.from_numpy(a) for n, a in list(extra) + [(i.name, numpy_helper.to_array(i)) for i in initializers]}
        kk = t64(k).repeat_interleave(Hq // Hkv, dim=1)
        vv = t64(v).repeat_interleave(Hq // Hkv, dim=1)
        sc = (1 / math.sqrt(E)) if scale is None else float(np.float32(scale))
        scores = t64(q) @ kk.transpose(-1, -2) * sc
        if score_mod:
            scores = score_mod[1](scores, outer)
        probs = torch.softmax(scores, dim=-1)
        if prob_mod:
            probs = prob_mod[1](probs, outer)
        y = (probs @ vv).numpy().astype(dtype)
        attrs = {}
        if scale is not None:
            attrs["scale"] = scale
        if softmax_precision is not None:
            attrs["softmax_precision"] = softmax_precision
        if score_mod:
            attrs["score_mod"] = score_mod[0]
        if prob_mod:
            attrs["prob_mod"] = prob_mod[0]
        node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], name="flex_attention", domain=PREVIEW, **attrs)
        inputs = [("Q", q), ("K", k), ("V", v)] + list(extra)
        self.cases.append(Case(name, covers, [node], inputs, [("Y", y)], {"": 26, PREVIEW: 1}, initializers))

    # SwiGLU

    def swiglu(self, name, covers, *, shape=(2, 3, 4), alpha=None, dtype=np.float32):
        a = self.normal(*shape, scale=4.0, dtype=dtype)
        a.flat[:3] = [-40, 40, 0]  # the sigmoid's ends and zero
        b = self.normal(*shape, dtype=dtype)
        al = 1.0 if alpha is None else float(np.float32(alpha))
        y = (t64(a) * torch.sigmoid(al * t64(a)) * t64(b)).numpy().astype(dtype)
        attrs = {} if alpha is None else {"alpha": alpha}
        node = helper.make_node("SwiGLU", ["A", "B"], ["Y"], name="swiglu", **attrs)
        self.cases.append(Case(name, covers, [node], [("A", a), ("B", b)], [("Y", y)], {"": 28}))


def linear_attention_ref(q, k, v, s0, g, b, Hq, Hkv, rule, scale):
    """The LinearAttention recurrence, token by token, in float64."""
    B, T, _ = q.shape
    dk, dv = q.shape[-1] // Hq, v.shape[-1] // Hkv
    Q = t64(q).reshape(B, T, Hq, dk)
    K = t64(k).reshape(B, T, Hkv, dk)
    V = t64(v).reshape(B, T, Hkv, dv)
    S = t64(s0) if s0 is not None else torch.zeros(B, Hkv, dk, dv, dtype=torch.float64)
    group = Hq // Hkv
    sc = 1 / math.sqrt(dk) if not scale else float(np.float32(scale))
    out = torch.zeros(B, T, Hq, dv, dtype=torch.float64)
    for t in range(T):
        if g is not None:
            G = t64(g)[:, t]
            G = G.reshape(B, Hkv, dk, 1) if G.shape[-1] == Hkv * dk else G.reshape(B, Hkv, 1, 1)
            S = S * torch.exp(G)
        w = V[:, t]
        if b is not None:
            beta = t64(b)[:, t].reshape(B, -1, 1)  # (B, Hkv or 1, 1)
            w = beta * (w - torch.einsum("bhkv,bhk->bhv", S, K[:, t]))
        S = S + K[:, t].unsqueeze(-1) * w.unsqueeze(-2)
        Sq = S.repeat_interleave(group, dim=1)
        out[:, t] = sc * torch.einsum("bhk,bhkv->bhv", Q[:, t], Sq)
    return out.reshape(B, T, Hq * dv).numpy(), S.numpy()


def modifier(name, nodes, io_name, out_name, elem=TensorProto.FLOAT, initializers=()):
    """A modifier graph of one rank-4 input and one output."""
    dims = ["B", "H", "L", "S"]
    return helper.make_graph(nodes, name,
                             [helper.make_tensor_value_info(io_name, elem, dims)],
                             [helper.make_tensor_value_info(out_name, elem, dims)],
                             initializer=list(initializers))


def build(seed):
    g = Generator(seed)
    la, flex, swi = g.linear_attention, g.flex_attention, g.swiglu

    la("la_linear_gqa_past", "linear, 4 query heads on 2 KV heads, past state", "linear", Hq=4)
    la("la_gated_per_key", "gated, per-key decay, no past state", "gated", past=False)
    la("la_gated_per_head_mqa", "gated, per-head decay, 3 query heads on 1 KV head, past state", "gated", Hq=3, Hkv=1, decay="per_head")
    la("la_delta_shared_beta_scale", "delta, beta shared by the heads (B, T, 1), explicit scale 0.3", "delta", beta="shared", scale=0.3)
    la("la_gated_delta_gqa_per_key", "gated_delta, GQA 4 on 2, per-key decay, per-head beta, past state", "gated_delta", Hq=4, T=7)
    la("la_gated_delta_per_head_decode", "gated_delta, one token with a past state, per-head decay", "gated_delta", T=1, decay="per_head")
    la("la_gated_delta_float64", "gated_delta in float64", "gated_delta", dtype=np.float64, Hq=4)

    cap = np.float32(2.5)
    softcap = modifier("softcap", [
        helper.make_node("Div", ["scores", "cap"], ["x"]),
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Mul", ["t", "cap"], ["scores_out"]),
    ], "scores", "scores_out", initializers=[numpy_helper.from_array(np.array(cap), "cap")])
    flex("flex_gqa_softcap", "GQA 4 on 2 heads, V head size 6, score_mod softcap with its own initializer", Hq=4, Ev=6,
         score_mod=(softcap, lambda s, o: torch.tanh(s / float(cap)) * float(cap)))

    bias = g.normal(1, 2, 3, 5)
    keep = (g.rng.random((2, 2, 3, 5)) < 0.8).astype(np.float32) / np.float32(0.8)
    add_bias = modifier("add_outer_bias", [helper.make_node("Add", ["scores", "bias"], ["scores_out"])], "scores", "scores_out")
    drop = modifier("outer_dropout_mask", [helper.make_node("Mul", ["probs", "keep"], ["probs_out"])], "probs", "probs_out")
    flex("flex_outer_scope", "score_mod adds a main-graph input, prob_mod multiplies by a main-graph initializer (outer-scope reads), scale 0.4",
         scale=0.4, extra=[("bias", bias)], initializers=[numpy_helper.from_array(keep, "keep")],
         score_mod=(add_bias, lambda s, o: s + o["bias"]), prob_mod=(drop, lambda p, o: p * o["keep"]))

    allowed = g.rng.random((2, 2, 3, 5)) < 0.6
    allowed[:, :, :, 0] = True
    allowed[1, 1, 2, :] = False  # one query sees no key: its row is NaN, as in the specification's softmax
    neg_inf = numpy_helper.from_array(np.array(-np.inf), "neg_inf")
    masked = modifier("outer_bool_mask", [helper.make_node("Where", ["allowed", "scores", "neg_inf"], ["scores_out"])],
                      "scores", "scores_out", elem=TensorProto.DOUBLE, initializers=[neg_inf])
    flex("flex_float64_outer_mask", "float64, score_mod masks with a main-graph bool input (a fully masked row gives NaN)",
         dtype=np.float64, extra=[("allowed", allowed)],
         score_mod=(masked, lambda s, o: torch.where(o["allowed"], s, torch.tensor(-math.inf, dtype=torch.float64))))

    half = numpy_helper.from_array(np.array(1.5), "factor")
    times = modifier("times_1_5", [helper.make_node("Mul", ["probs", "factor"], ["probs_out"])], "probs", "probs_out",
                     elem=TensorProto.DOUBLE, initializers=[half])
    flex("flex_softmax_precision_double", "float32 inputs with softmax_precision double: prob_mod sees float64", L=4, S=4,
         softmax_precision=TensorProto.DOUBLE, prob_mod=(times, lambda p, o: p * 1.5))

    swi("swiglu_default", "alpha 1 (SiLU gate), saturated sigmoid ends")
    swi("swiglu_alpha_float64", "alpha 1.702 in float64", shape=(3, 5), alpha=1.702, dtype=np.float64)
    return g.cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    cases = build(args.seed)
    for c in cases:
        c.write(args.out)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump({"seed": args.seed, "torch": torch.__version__, "cases": [c.manifest() for c in cases]}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
