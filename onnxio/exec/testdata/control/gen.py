"""Writes the control-flow and local-function cases of TestControlCases:
one folder per case with model.onnx and test_data_set_0, and
manifest.json naming what each case covers.

Every expected output comes from ONNX Runtime (PyTorch's for the PyTorch
export, with which ONNX Runtime must agree at rtol 1e-5). Where ONNX's
reference evaluator runs a case right, the two must also agree (rtol
1e-6) or the script stops; ONNX 1.23's reference does not run the others
right: its Loop concatenates scan elements instead of stacking them, its
Scan runs forward directions only, and it fails on local functions whose
attribute references the call leaves unset. (Both it and ONNX Runtime end
a Loop on the body's condition output even when the node has no cond
input, which ONNX's table says is then ignored; loop_for pins that.)

Run with the reference virtualenv (torch 2.15, onnx 1.23.2, onnxruntime
1.31.1, numpy):

    ~/.cache/attnrun/venv/bin/python gen.py
"""
import json
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))
RNG = np.random.default_rng(2026)
F = TP.FLOAT


def vi(name, elem, shape=None):
    return h.make_tensor_value_info(name, elem, shape)


def const(name, array):
    return h.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(array), name + "_value"))


def model(nodes, inputs, outputs, opset, functions=(), domains=()):
    imports = [h.make_opsetid("", opset)] + [h.make_opsetid(d, 1) for d in domains]
    g = h.make_graph(nodes, "case", inputs, outputs)
    return h.make_model(g, opset_imports=imports, functions=list(functions), ir_version=10,
                        producer_name="attnrun testdata/control/gen.py")


def body(name, nodes, inputs, outputs):
    return h.make_graph(nodes, name, inputs, outputs)


def write(name, covers, m, feeds, reference=False):
    onnx.checker.check_model(m, full_check=False)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = sess.run(None, feeds)
    if reference:
        ref = ReferenceEvaluator(m).run(None, feeds)
        for o, r in zip(outs, ref):
            np.testing.assert_allclose(o, r, rtol=1e-6, atol=1e-7, err_msg=name)
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(m, os.path.join(d, "model.onnx"))
    for k, (info, x) in enumerate(zip(m.graph.input, feeds.values())):
        t = numpy_helper.from_array(np.asarray(x), info.name)
        onnx.save_tensor(t, os.path.join(d, "test_data_set_0", f"input_{k}.pb"))
    for k, (info, y) in enumerate(zip(m.graph.output, outs)):
        t = numpy_helper.from_array(np.asarray(y), info.name)
        onnx.save_tensor(t, os.path.join(d, "test_data_set_0", f"output_{k}.pb"))
    return {"name": name, "covers": covers}


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def scan_axes_directions():
    # State (2,), X scanned along axis 1 forward, Y along its last axis in
    # reverse; o1 (3, 2) elements stacked on the last axis, prepended;
    # o2 (2,) elements stacked on axis 0, appended.
    b = body("step", [
        const("zero", np.array([0], np.int64)),
        h.make_node("ReduceSum", ["x_t", "zero"], ["xs"], keepdims=0),
        h.make_node("Mul", ["xs", "y_t"], ["xy"]),
        h.make_node("Add", ["st", "xy"], ["st_out"]),
        h.make_node("Mul", ["x_t", "st_out"], ["o1"]),
        h.make_node("Identity", ["st_out"], ["o2"]),
    ], [vi("st", F, [2]), vi("x_t", F, [3, 2]), vi("y_t", F, [2])],
        [vi("st_out", F, [2]), vi("o1", F, [3, 2]), vi("o2", F, [2])])
    n = h.make_node("Scan", ["s0", "X", "Y"], ["s", "o1s", "o2s"], body=b, num_scan_inputs=2,
                    scan_input_axes=[1, -1], scan_input_directions=[0, 1],
                    scan_output_axes=[-1, 0], scan_output_directions=[1, 0])
    m = model([n], [vi("s0", F, [2]), vi("X", F, [3, 4, 2]), vi("Y", F, [2, 4])],
              [vi("s", F, [2]), vi("o1s", F, [3, 2, 4]), vi("o2s", F, [4, 2])], 17)
    return write("scan_axes_directions", "Scan-16: scan_input_axes (positive and negative), reversed input, "
                 "scan_output_axes (last axis), prepended and appended outputs",
                 m, {"s0": randn(2), "X": randn(3, 4, 2), "Y": randn(2, 4)})


def scan_untyped_body():
    # The body declares no types, as ONNX's expanded function graphs do;
    # it reads a value of the main graph (w) and scans along axis 0.
    b = body("step", [
        h.make_node("Mul", ["x_t", "w"], ["xw"]),
        h.make_node("Add", ["st", "xw"], ["st_out"]),
        h.make_node("Identity", ["st_out"], ["y_t"]),
    ], [h.make_value_info("st", onnx.TypeProto()), h.make_value_info("x_t", onnx.TypeProto())],
        [h.make_value_info("st_out", onnx.TypeProto()), h.make_value_info("y_t", onnx.TypeProto())])
    n = h.make_node("Scan", ["s0", "X"], ["s", "ys"], body=b, num_scan_inputs=1)
    m = model([n], [vi("s0", F, [3]), vi("X", F, [5, 3]), vi("w", F, [3])], [vi("s", F, [3]), vi("ys", F, [5, 3])], 21)
    return write("scan_untyped_body", "Scan-21 whose body declares no types and reads an outer value",
                 m, {"s0": randn(3), "X": randn(5, 3), "w": randn(3)}, reference=True)


def scan8_sequence_lens():
    # Scan-8: batch axis 0, sequence axis 1, the input read in reverse
    # within each entry's length; outputs past a length are zero.
    b = body("step", [
        h.make_node("Add", ["st", "x_t"], ["st_out"]),
        h.make_node("Mul", ["st_out", "x_t"], ["y_t"]),
    ], [vi("st", F, [2]), vi("x_t", F, [2])], [vi("st_out", F, [2]), vi("y_t", F, [2])])
    n = h.make_node("Scan", ["lens", "s0", "X"], ["s", "ys"], body=b, num_scan_inputs=1, directions=[1])
    m = model([n], [vi("lens", TP.INT64, [3]), vi("s0", F, [3, 2]), vi("X", F, [3, 4, 2])],
              [vi("s", F, [3, 2]), vi("ys", F, [3, 4, 2])], 8)
    m.ir_version = 7
    return write("scan8_sequence_lens", "Scan-8 with sequence_lens (4, 2, 1) and a reversed input",
                 m, {"lens": np.array([4, 2, 1], np.int64), "s0": randn(3, 2), "X": randn(3, 4, 2)})


def loop_while():
    # No trip count: the body's condition ends the loop (x doubles until
    # its sum passes 40); each x is a scan output.
    b = body("grow", [
        h.make_node("Mul", ["x_in", "two"], ["x_out"]),
        h.make_node("ReduceSum", ["x_out"], ["sum"], keepdims=0),
        h.make_node("Less", ["sum", "limit"], ["cond_out"]),
        h.make_node("Identity", ["x_out"], ["x_scan"]),
    ], [vi("i", TP.INT64, []), vi("cond_in", TP.BOOL, []), vi("x_in", F, [2])],
        [vi("cond_out", TP.BOOL, []), vi("x_out", F, [2]), vi("x_scan", F, [2])])
    nodes = [const("two", np.float32(2)), const("limit", np.float32(40)), const("go", np.bool_(True)),
             h.make_node("Loop", ["", "go", "x"], ["x_final", "xs"], body=b)]
    m = model(nodes, [vi("x", F, [2])], [vi("x_final", F, [2]), vi("xs", F, [None, 2])], 13)
    return write("loop_while", "Loop-13 with a condition and no trip count", m,
                 {"x": np.array([0.75, 1.5], np.float32)})


def loop_for():
    # A trip count without a condition input; the body's condition output
    # (i < 2) still ends the loop after 3 of 4 iterations, as ONNX Runtime
    # runs it (ONNX's table says it is ignored then). The iteration number
    # is carried into x and stacked as an int64 scan output.
    b = body("count", [
        const("two", np.int64(2)),
        h.make_node("Less", ["i", "two"], ["cond_out"]),
        h.make_node("Cast", ["i"], ["fi"], to=F),
        h.make_node("Add", ["x_in", "fi"], ["x_out"]),
        h.make_node("Identity", ["i"], ["i_scan"]),
    ], [vi("i", TP.INT64, []), vi("cond_in", TP.BOOL, []), vi("x_in", F, [3])],
        [vi("cond_out", TP.BOOL, []), vi("x_out", F, [3]), vi("i_scan", TP.INT64, [])])
    n = h.make_node("Loop", ["M", "", "x"], ["x_final", "is"], body=b)
    m = model([n], [vi("M", TP.INT64, []), vi("x", F, [3])], [vi("x_final", F, [3]), vi("is", TP.INT64, [None])], 16)
    return write("loop_for", "Loop-16 with a trip count and no condition input; the body's condition ends it first",
                 m, {"M": np.array(4, np.int64), "x": randn(3)})


def loop_early_exit():
    # Trip count 10 and a condition: the body stops after iteration 2.
    b = body("early", [
        const("two", np.int64(2)),
        h.make_node("Less", ["i", "two"], ["cond_out"]),
        h.make_node("Mul", ["x_in", "x_in"], ["sq"]),
        h.make_node("Sub", ["sq", "x_in"], ["x_out"]),
        h.make_node("Identity", ["x_out"], ["x_scan"]),
    ], [vi("i", TP.INT64, []), vi("cond_in", TP.BOOL, []), vi("x_in", F, [2, 2])],
        [vi("cond_out", TP.BOOL, []), vi("x_out", F, [2, 2]), vi("x_scan", F, [2, 2])])
    n = h.make_node("Loop", ["M", "cond", "x"], ["x_final", "xs"], body=b)
    m = model([n], [vi("M", TP.INT64, []), vi("cond", TP.BOOL, []), vi("x", F, [2, 2])],
              [vi("x_final", F, [2, 2]), vi("xs", F, [None, 2, 2])], 11)
    return write("loop_early_exit", "Loop-11 with both a trip count and a condition; the condition ends it first",
                 m, {"M": np.array(10, np.int64), "cond": np.array(True), "x": randn(2, 2)})


def loop_growing():
    # A carried value that grows each iteration (allowed from Loop-11).
    b = body("grow", [
        h.make_node("Identity", ["cond_in"], ["cond_out"]),
        h.make_node("Concat", ["x_in", "step"], ["x_out"], axis=0),
    ], [vi("i", TP.INT64, []), vi("cond_in", TP.BOOL, []), vi("x_in", F, [None])],
        [vi("cond_out", TP.BOOL, []), vi("x_out", F, [None])])
    n = h.make_node("Loop", ["M", "", "x"], ["x_final"], body=b)
    m = model([n], [vi("M", TP.INT64, []), vi("x", F, [2]), vi("step", F, [3])], [vi("x_final", F, [None])], 13)
    return write("loop_growing", "Loop-13 whose carried value changes shape each iteration; the body reads an outer value",
                 m, {"M": np.array(3, np.int64), "x": randn(2), "step": randn(3)})


def loop_zero_trips():
    # No iteration: carried values pass through, the scan output is empty
    # in the shape the body declares.
    b = body("never", [
        h.make_node("Identity", ["cond_in"], ["cond_out"]),
        h.make_node("Neg", ["x_in"], ["x_out"]),
        h.make_node("Identity", ["x_in"], ["x_scan"]),
    ], [vi("i", TP.INT64, []), vi("cond_in", TP.BOOL, []), vi("x_in", F, [2])],
        [vi("cond_out", TP.BOOL, []), vi("x_out", F, [2]), vi("x_scan", F, [2])])
    n = h.make_node("Loop", ["M", "", "x"], ["x_final", "xs"], body=b)
    m = model([n], [vi("M", TP.INT64, []), vi("x", F, [2])], [vi("x_final", F, [2]), vi("xs", F, [None, 2])], 13)
    return write("loop_zero_trips", "Loop-13 with trip count 0: inputs pass through, the scan output is (0, 2)",
                 m, {"M": np.array(0, np.int64), "x": randn(2)})


def if_in_loop():
    # An If inside a Loop body: its then branch reads w from the main graph
    # (two levels out), its else branch the body's acc_in. (ONNX Runtime
    # refuses a body that outputs an outer value without a node between.)
    then_b = body("then", [h.make_node("Add", ["acc_in", "w"], ["r"])], [], [vi("r", F, [2])])
    else_b = body("else", [h.make_node("Identity", ["acc_in"], ["same"])], [], [vi("same", F, [2])])
    b = body("alternate", [
        const("two", np.int64(2)),
        const("zero", np.int64(0)),
        h.make_node("Mod", ["i", "two"], ["parity"]),
        h.make_node("Equal", ["parity", "zero"], ["even"]),
        h.make_node("If", ["even"], ["acc_out"], then_branch=then_b, else_branch=else_b),
        h.make_node("Identity", ["cond_in"], ["cond_out"]),
        h.make_node("Identity", ["acc_out"], ["acc_scan"]),
    ], [vi("i", TP.INT64, []), vi("cond_in", TP.BOOL, []), vi("acc_in", F, [2])],
        [vi("cond_out", TP.BOOL, []), vi("acc_out", F, [2]), vi("acc_scan", F, [2])])
    n = h.make_node("Loop", ["M", "", "acc"], ["acc_final", "accs"], body=b)
    m = model([n], [vi("M", TP.INT64, []), vi("acc", F, [2]), vi("w", F, [2])],
              [vi("acc_final", F, [2]), vi("accs", F, [None, 2])], 13)
    return write("if_in_loop", "If-13 nested in a Loop body, reading a main-graph value and outputting a body value",
                 m, {"M": np.array(5, np.int64), "acc": randn(2), "w": randn(2)})


def if_outer_output():
    # Branches with several outputs, reading a graph input.
    then_b = body("then", [h.make_node("Relu", ["x"], ["r"]), h.make_node("Sigmoid", ["x"], ["s"])], [],
                  [vi("s", F, [3]), vi("r", F, [3])])
    else_b = body("else", [h.make_node("Neg", ["x"], ["a"]), h.make_node("Abs", ["x"], ["b"])], [],
                  [vi("a", F, [3]), vi("b", F, [3])])
    n = h.make_node("If", ["c"], ["y", "z"], then_branch=then_b, else_branch=else_b)
    m = model([n], [vi("c", TP.BOOL, []), vi("x", F, [3])], [vi("y", F, [3]), vi("z", F, [3])], 11)
    x = randn(3)
    cases = [write("if_then", "If-11 with two outputs, taking the then branch", m,
                   {"c": np.array(True), "x": x}, reference=True)]
    cases.append(write("if_else", "If-11 taking the else branch", m, {"c": np.array(False), "x": x}, reference=True))
    return cases


def functions_attributes():
    # local.ScaledLeaky(X) = LeakyRelu(X·scale, alpha): alpha has no
    # default, scale defaults to 2; three calls set both, one, none.
    f = h.make_function("local", "ScaledLeaky", ["X"], ["Y"], [
        _ref_node("Constant", [], ["s"], [("value_float", "scale", onnx.AttributeProto.FLOAT)]),
        h.make_node("Mul", ["X", "s"], ["t"]),
        _ref_node("LeakyRelu", ["t"], ["Y"], [("alpha", "alpha", onnx.AttributeProto.FLOAT)]),
    ], [h.make_opsetid("", 17)], attributes=["alpha"],
        attribute_protos=[h.make_attribute("scale", 2.0)])
    nodes = [
        h.make_node("ScaledLeaky", ["x"], ["a"], domain="local", name="both", alpha=0.1, scale=3.0),
        h.make_node("ScaledLeaky", ["x"], ["b"], domain="local", name="alpha_only", alpha=0.25),
        h.make_node("ScaledLeaky", ["x"], ["c"], domain="local", name="neither"),
    ]
    m = model(nodes, [vi("x", F, [2, 3])], [vi("a", F, [2, 3]), vi("b", F, [2, 3]), vi("c", F, [2, 3])], 17,
              functions=[f], domains=["local"])
    return write("function_attributes", "a local function called three times: attribute references set by the call, "
                 "a default from attribute_proto, an unset reference (the op's own default)",
                 m, {"x": randn(2, 3)})


def _ref_node(op, ins, outs, refs):
    """A node whose attributes (name, ref, type) refer to its function's."""
    n = h.make_node(op, ins, outs)
    for name, ref, typ in refs:
        n.attribute.append(onnx.AttributeProto(name=name, ref_attr_name=ref, type=typ))
    return n


def functions_nested():
    # local.Outer(X, B) -> (Y, Z) calls local.Inner twice; an If in its
    # body reads the function's input X and refers to its attribute alpha
    # inside the branch. The call uses Y only; Inner writes a value named
    # like one of the main graph's ("t"), which expansion must keep apart.
    inner = h.make_function("local", "Inner", ["X"], ["Y"], [
        h.make_node("Tanh", ["X"], ["t"]),
        h.make_node("Mul", ["t", "X"], ["Y"]),
    ], [h.make_opsetid("", 17)])
    then_b = body("then", [_ref_node("LeakyRelu", ["X"], ["r"], [("alpha", "alpha", onnx.AttributeProto.FLOAT)])],
                  [], [vi("r", F, None)])
    else_b = body("else", [h.make_node("Neg", ["X"], ["r2"])], [], [vi("r2", F, None)])
    outer = h.make_function("local", "Outer", ["X", "B", "C"], ["Y", "Z"], [
        h.make_node("Inner", ["X"], ["i1"], domain="local"),
        h.make_node("Inner", ["i1"], ["i2"], domain="local"),
        h.make_node("If", ["C"], ["branch"], then_branch=then_b, else_branch=else_b),
        h.make_node("Add", ["i2", "B"], ["sum"]),
        h.make_node("Add", ["sum", "branch"], ["Y"]),
        h.make_node("Sub", ["i2", "B"], ["Z"]),
    ], [h.make_opsetid("", 17), h.make_opsetid("local", 1)], attributes=["alpha"])
    nodes = [
        h.make_node("Exp", ["x"], ["t"]),
        h.make_node("Outer", ["t", "b", "c"], ["y", ""], domain="local", name="outer", alpha=0.3),
        h.make_node("Add", ["y", "t"], ["out"]),
    ]
    m = model(nodes, [vi("x", F, [4]), vi("b", F, [4]), vi("c", TP.BOOL, [])], [vi("out", F, [4])], 17,
              functions=[inner, outer], domains=["local"])
    x, b = randn(4), randn(4)
    return [write("function_nested_then", "nested local functions, an If in a function body referring to the "
                  "function's input and attribute, an output the call omits, a name shared with the main graph",
                  m, {"x": x, "b": b, "c": np.array(True)}),
            write("function_nested_else", "the same model taking the else branch", m, {"x": x, "b": b, "c": np.array(False)})]


def functions_opset():
    # The model imports opset 17, the function opset 21; ONNX allows it as
    # long as every op of the body has the same version under both
    # imports (Softmax-13, Mul-14), and ONNX Runtime then runs the body.
    f = h.make_function("local", "Attend", ["S", "V"], ["Y"], [
        h.make_node("Softmax", ["S"], ["P"], axis=-1),
        h.make_node("MatMul", ["P", "V"], ["Y"]),
    ], [h.make_opsetid("", 21)])
    n = h.make_node("Attend", ["s", "v"], ["y"], domain="local")
    m = model([n], [vi("s", F, [2, 3, 4]), vi("v", F, [2, 4, 5])], [vi("y", F, [2, 3, 5])], 17,
              functions=[f], domains=["local"])
    return write("function_opset", "a local function importing opset 21 in an opset-17 model",
                 m, {"s": randn(2, 3, 4), "v": randn(2, 4, 5)})


def torch_modules_as_functions():
    # A PyTorch export that keeps each module as a local function
    # (TorchScript exporter, export_modules_as_functions): nested
    # functions in five domains, attributes referenced from the calls
    # (LayerNorm's eps, GELU's approximate, Linear's sizes). The expected
    # output is PyTorch's; ONNX Runtime must agree.
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)
            self.ln = torch.nn.LayerNorm(16)
            self.ff = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))

        def forward(self, x):
            y, _ = self.attn(x, x, x, need_weights=False)
            h = self.ln(x + y)
            return h + self.ff(h)

    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.b1, self.b2 = Block(), Block()

        def forward(self, x):
            return self.b2(self.b1(x))

    torch.manual_seed(2026)
    m = Stack().eval()
    x = torch.randn(2, 5, 16)
    path = os.path.join(HERE, "torch_modules.onnx")
    torch.onnx.export(m, (x,), path, dynamo=False, opset_version=17, export_modules_as_functions=True,
                      input_names=["x"], output_names=["y"])
    mp = onnx.load(path)
    os.remove(path)
    assert len(mp.functions) >= 5, len(mp.functions)
    with torch.no_grad():
        want = m(x).numpy()
    name = "torch_modules_as_functions"
    case = write(name, f"PyTorch {torch.__version__} export_modules_as_functions: {len(mp.functions)} nested local "
                 "functions with attribute references", mp, {"x": x.numpy()})
    np.testing.assert_allclose(want, onnx.numpy_helper.to_array(onnx.load_tensor(
        os.path.join(HERE, name, "test_data_set_0", "output_0.pb"))), rtol=1e-5, atol=1e-6)
    onnx.save_tensor(numpy_helper.from_array(want, mp.graph.output[0].name),
                     os.path.join(HERE, name, "test_data_set_0", "output_0.pb"))
    return case


def main():
    cases = [scan_axes_directions(), scan_untyped_body(), scan8_sequence_lens(), loop_while(), loop_for(), loop_early_exit(),
             loop_growing(), loop_zero_trips(), if_in_loop()]
    cases += if_outer_output()
    cases.append(functions_attributes())
    cases += functions_nested()
    cases.append(functions_opset())
    cases.append(torch_modules_as_functions())
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump({"generator": "gen.py", "onnx": onnx.__version__, "onnxruntime": ort.__version__, "cases": cases},
                  f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
