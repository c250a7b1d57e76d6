"""Exports Hugging Face models and PyTorch modules with PyTorch 2.x, with test data.

Run with the reference virtualenv (scripts/install-reference-tools.sh), from
the repository root:

    ~/.cache/attnrun/venv/bin/python testdata/pytorch2/gen.py --out testdata/pytorch2/fixtures
    ~/.cache/attnrun/venv/bin/python testdata/pytorch2/gen.py --out /tmp/fresh --seed 4242 --all

Every case (hf_cases.py, torch_cases.py) goes through each exporter of
case.EXPORTERS: torch.onnx.export(dynamo=False) at opset 17, and
torch.onnx.export(dynamo=True) at opsets 18 and 23. Each export is written as

    OUT/<case>_<ts17|dynamo18|dynamo23>/model.onnx
    OUT/<case>_<exporter>/test_data_set_N/input_K.pb, output_K.pb

(serialized onnx TensorProto, the ONNX backend-test layout); the outputs are
PyTorch's, eager, float32, in eval mode. Batch and sequence axes (and the KV
cache's past length) are dynamic, and each fixture has two data sets of
different shapes, unless the case says the export froze the example's
shapes (checked with ONNX Runtime). ONNX Runtime runs every export on its data sets and
onnx.checker checks it; both results go into OUT/manifest.json, which lists
every fixture: its case, source, exporter, opset, producer, interface, ops,
and, for an export that failed, the reason.

A case with a float64_reference (a model on which PyTorch float32 itself
strays from the exact result by more than 1e-6) also gets
OUT/<fixture>/float64/test_data_set_N, the outputs of a float64 copy of the
model on the same inputs, and in the manifest PyTorch float32's distance
from them per output: the float64 rule of scripts/pytorch2_crosscheck.sh
(docs/crosscheck.md), which gen.py applies to ONNX Runtime too.

The same seed writes the same bytes. Without --all, the exports left out of
git are listed in the manifest but not written: all-MiniLM-L6-v2 (90 MB of
real weights), the eager twins of the Hugging Face models that have an sdpa
fixture and, of the architectures after the first six, all but the few
exports hf_cases.COMMITTED_EXPORTS names. An export that fails is reported
and listed; the run exits 1 if one fails that the case does not name in
export_failures, or if a named one now succeeds. OUT is replaced only when
the run got that far.
"""

import argparse
import collections
import contextlib
import copy
import fnmatch
import inspect
import io
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import traceback
import warnings

import numpy as np
import onnx
import onnxruntime
import torch
from onnx import numpy_helper

sys.dont_write_bytecode = True  # no __pycache__ folders in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from case import DERIVED, EXPORTERS, FLOAT64_FACTOR, FLOAT64_SLACK  # noqa: E402
from hf_cases import hf_cases  # noqa: E402
from torch_cases import torch_cases  # noqa: E402

RTOL, ATOL = 1e-5, 1e-6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory to (re)create")
    parser.add_argument("--seed", type=int, default=0, help="weights and inputs seed (default 0)")
    parser.add_argument("--all", action="store_true",
                        help="also write the cases left out of git (MiniLM's real weights, eager twins)")
    parser.add_argument("--cases", default="", help="comma-separated case name patterns (default: all)")
    args = parser.parse_args()

    quiet_exporters()
    # One thread: the same bits on any machine, whatever its core count.
    torch.set_num_threads(1)
    cases = hf_cases() + torch_cases()
    if args.cases:
        patterns = args.cases.split(",")
        cases = [c for c in cases if any(fnmatch.fnmatch(c.name, p) for p in patterns)]
        if not cases:
            raise SystemExit(f"gen.py: no case matches {args.cases}")

    out = os.path.abspath(args.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".pytorch2-", dir=os.path.dirname(out))
    try:
        entries = []
        for case in cases:
            entries += export_case(case, args.seed, args.all, tmp)
        write_manifest(os.path.join(tmp, "manifest.json"), args.seed, entries)
        if os.path.exists(out):
            shutil.rmtree(out)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

    counts = collections.Counter(e["status"] for e in entries)
    unexpected = [e for e in entries if e.get("unexpected")]
    print(f"wrote {counts['ok']} exports to {out}; {counts['export_failed']} failed, "
          f"{counts['not_written']} left out of git (--all writes them)")
    for e in unexpected:
        print(f"UNEXPECTED {e['name']}: {e['unexpected']}")
    if unexpected:
        sys.exit(1)


def quiet_exporters():
    """The exporters narrate every step and warn about what they trace; the
    fixtures' outcome is what matters, and failures are reported below."""
    warnings.simplefilter("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    logging.getLogger("transformers").setLevel(logging.ERROR)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def export_case(case, seed, write_all, out):
    """Builds the case's module once and exports it with every exporter;
    returns one manifest entry per exporter."""
    names = [f"{case.name}_{e.key}" for e in EXPORTERS]
    if case.not_committed and not write_all:
        return [base_entry(case, e, n, "not_written", f"{case.not_committed}; gen.py --all writes it")
                for e, n in zip(EXPORTERS, names)]
    skipped = {}
    if not write_all and case.committed_exporters is not None:
        skipped = {e.key: base_entry(case, e, n, "not_written", f"{case.subset_reason}; gen.py --all writes it")
                   for e, n in zip(EXPORTERS, names) if e.key not in case.committed_exporters}
        if len(skipped) == len(EXPORTERS):
            return list(skipped.values())
    torch.manual_seed(seed)
    try:
        module = case.build().eval()
        gen = torch.Generator().manual_seed(seed)
        sets = case.data_sets(module, gen)
        # Grad mode stays on, as in a plain torch.onnx.export call: under
        # no_grad, nn.MultiheadAttention and nn.TransformerEncoderLayer take
        # their fused inference kernels, which the TorchScript exporter
        # cannot export. The references are computed on the same path.
        expected = [tuple(t.detach() for t in as_tuple(module(*flat(s)))) for s in sets]
        truth = float64_outputs(module, sets) if case.float64_reference else None
    except Exception as exc:  # the case cannot even run in PyTorch: every export fails
        return [failed(case, e, n, exc) for e, n in zip(EXPORTERS, names)]

    entries = []
    for exporter, name in zip(EXPORTERS, names):
        if exporter.key in skipped:
            entries.append(skipped[exporter.key])
            continue
        folder = os.path.join(out, name)
        os.mkdir(folder)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                export(case, module, sets[0], exporter, os.path.join(folder, "model.onnx"))
        except Exception as exc:
            shutil.rmtree(folder)
            entries.append(failed(case, exporter, name, exc))
            continue
        entry = describe(case, exporter, name, folder, sets, expected, truth, module)
        reason = expected_failure(case, exporter)
        if reason:
            entry["unexpected"] = f"exported, but the case says it fails: {reason} (remove it from export_failures)"
        entries.append(entry)
        print(f"ok    {name:<44} {sum(entry['ops'].values()):4d} nodes  onnxruntime {entry['onnxruntime']}")
    return entries


def export(case, module, example, exporter, path):
    names = list(example)
    if not exporter.dynamo:
        torch.onnx.export(module, tuple(example.values()), path, dynamo=False,
                          opset_version=exporter.opset, input_names=names, output_names=case.outputs,
                          dynamic_axes=case.axes)
        return
    args, shapes = dynamo_arguments(module, example, case.axes)
    torch.onnx.export(module, args, path, dynamo=True, opset_version=exporter.opset,
                      input_names=names, output_names=case.outputs, dynamic_shapes=shapes,
                      external_data=False)
    drop_stack_traces(path)


def drop_stack_traces(path):
    """Removes the Python stack trace the dynamo exporter records on every
    node: it names files on this machine (so the bytes would differ between
    checkouts) and is half of a small model's file. The other node metadata
    (module class hierarchy, name scopes, FX node) stays, as users get it."""
    model = onnx.load(path)
    for node in model.graph.node:
        kept = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)
    onnx.save(model, path)


def dynamo_arguments(module, example, axes):
    """The example inputs and their dynamic shapes. The shapes follow
    forward's signature (a *args parameter takes the remaining inputs' shapes
    as one tuple), the inputs are passed flat. Each axis symbol is one
    torch.export.Dim shared by every input, except the derived ones, left
    for torch.export to infer."""
    dims = {}

    def shape(name):
        spec = {}
        for axis, symbol in axes.get(name, {}).items():
            if symbol in DERIVED:
                spec[axis] = torch.export.Dim.DYNAMIC
            else:
                spec[axis] = dims.setdefault(symbol, torch.export.Dim(symbol))
        return spec or None

    specs = [shape(n) for n in example]
    shapes = []
    for p in inspect.signature(module.forward).parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            if len(specs) > len(shapes):
                shapes.append(tuple(specs[len(shapes):]))
            break
        shapes.append(specs[len(shapes)])
    return tuple(example.values()), tuple(shapes)


def float64_outputs(module, sets):
    """The module's outputs in float64 (a copy of it, float inputs widened),
    rounded to float32: the exact result as far as the float64 rule cares."""
    wide = copy.deepcopy(module).double()
    with torch.no_grad():
        return [tuple(t.float() for t in as_tuple(wide(*[t.double() if t.is_floating_point() else t
                                                           for t in flat(s)])))
                for s in sets]


def float64_bounds(names, expected, truth):
    """Per data set and output, PyTorch float32's largest distance from the
    float64 reference and the float64 rule's bound on a runtime's."""
    return [{n: {"pytorch_float32": max_abs(e, t), "bound": FLOAT64_FACTOR * max_abs(e, t) + FLOAT64_SLACK}
             for n, e, t in zip(names, outs, wide)}
            for outs, wide in zip(expected, truth)]


def max_abs(a, b):
    return float(torch.max(torch.abs(a.double() - b.double()))) if a.numel() else 0.0


def describe(case, exporter, name, folder, sets, expected, truth, module):
    """Writes the test-data sets and extra references of a written export and
    returns its manifest entry, with onnx.checker's and ONNX Runtime's verdicts."""
    path = os.path.join(folder, "model.onnx")
    model = onnx.load(path)
    entry = base_entry(case, exporter, name, "ok")
    frozen = case.frozen_shapes.get(exporter.key)
    if frozen:
        entry["frozen_shapes"] = frozen
        if run_onnxruntime(path, sets[1:], expected[1:]) == "ok":
            entry["unexpected"] = f"runs on other shapes, but the case says: {frozen} (remove it from frozen_shapes)"
        sets, expected = sets[:1], expected[:1]
        truth = truth and truth[:1]
    for k, (inputs, outputs) in enumerate(zip(sets, expected)):
        write_test_data(folder, k, inputs, outputs, case.outputs)
    bounds = None
    if truth:
        # The float64 reference as test-data sets of their own, for
        # `attnrun check --data FIXTURE/float64/test_data_set_N`.
        os.mkdir(os.path.join(folder, "float64"))
        for k, (inputs, outputs) in enumerate(zip(sets, truth)):
            write_test_data(os.path.join(folder, "float64"), k, inputs, outputs, case.outputs)
        bounds = float64_bounds(case.outputs, expected, truth)
        entry["float64"] = {"reason": case.float64_reference, "factor": FLOAT64_FACTOR, "slack": FLOAT64_SLACK,
                            "test_data_sets": bounds}
    entry["producer"] = f"{model.producer_name} {model.producer_version}"
    entry["inputs"] = value_infos(model.graph.input)
    entry["outputs"] = value_infos(model.graph.output)
    entry["test_data_sets"] = [{n: list(t.shape) for n, t in s.items()} for s in sets]
    entry["ops"] = dict(sorted(collections.Counter(
        (f"{n.domain}." if n.domain else "") + n.op_type for n in model.graph.node).items()))
    entry["checker"] = checker(model)
    entry["onnxruntime"] = run_onnxruntime(path, sets, expected, truth, bounds)
    if case.extra:
        entry["extra_files"] = case.extra(module, sets, folder)
    return entry


def base_entry(case, exporter, name, status, reason=""):
    committed = not case.not_committed and (case.committed_exporters is None
                                            or exporter.key in case.committed_exporters)
    entry = {"name": name, "case": case.name, "source": case.source,
             "exporter": "dynamo" if exporter.dynamo else "torchscript", "opset": exporter.opset,
             "committed": committed, "status": status}
    if reason:
        entry["reason"] = reason
    return entry


def failed(case, exporter, name, exc):
    reason = summary(exc)
    entry = base_entry(case, exporter, name, "export_failed", reason)
    print(f"FAIL  {name:<44} {reason}")
    if not expected_failure(case, exporter):
        entry["unexpected"] = "the export failed and the case does not list it in export_failures"
        traceback.print_exception(exc, file=sys.stdout)
    return entry


def expected_failure(case, exporter):
    return case.export_failures.get(exporter.key) or case.export_failures.get("*")


def summary(exc):
    """One line for an exception: torch.onnx's own summary where it has one."""
    text = str(exc)
    found = re.search(r"## Exception summary\s+(.+)", text)
    line = found.group(1) if found else (text.strip().splitlines() or [""])[0]
    line = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
    return f"{type(exc).__name__}: {line}"[:400]


def checker(model):
    try:
        onnx.checker.check_model(model, full_check=True)
        return "ok"
    except Exception as exc:
        return summary(exc)


def run_onnxruntime(path, sets, expected, truth=None, bounds=None):
    """ONNX Runtime's outputs against PyTorch's: "ok", or what went wrong.
    With a float64 reference ONNX Runtime is a second reference, not a
    runtime under test: its distance from float64 is recorded in bounds
    (and widens attnrun's bound to twice the larger of the two references'
    distances), and an output out of 1e-5 / 1e-6 is reported, not failed:
    "ok as a float64 reference (...)"."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    try:
        session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        by_rule = []
        for k, (inputs, outputs) in enumerate(zip(sets, expected)):
            got = session.run(None, {n: t.numpy() for n, t in inputs.items()})
            for i, (name, g, w) in enumerate(zip([o.name for o in session.get_outputs()], got, outputs)):
                w = w.numpy()
                if truth and g.shape == w.shape:
                    far = float(np.max(np.abs(g.astype(np.float64) - truth[k][i].numpy()))) if g.size else 0.0
                    bound = bounds[k][name]
                    bound["onnxruntime_float32"] = far
                    bound["bound"] = FLOAT64_FACTOR * max(bound["pytorch_float32"], far) + FLOAT64_SLACK
                if g.shape == w.shape and np.allclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True):
                    continue
                worst = float(np.max(np.abs(g - w))) if g.shape == w.shape else "shape " + str(g.shape)
                if truth and g.shape == w.shape:
                    by_rule.append(f"test_data_set_{k} {name} {far:.3g} from float64, PyTorch float32 "
                                   f"{bound['pytorch_float32']:.3g}")
                    continue
                return f"mismatch in test_data_set_{k} {name}: max_abs {worst}"
        if by_rule:
            return "ok as a float64 reference: " + "; ".join(by_rule)
    except Exception as exc:
        # ONNX Runtime's messages put a C++ signature between the node and the
        # reason: keep both ends.
        message = re.sub(r"\s+", " ", f"{type(exc).__name__}: {exc}").strip()
        return message if len(message) <= 400 else message[:180] + " ... " + message[-200:]
    return "ok"


def flat(inputs):
    return list(inputs.values())


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def write_test_data(folder, index, inputs, outputs, output_names):
    data = os.path.join(folder, f"test_data_set_{index}")
    os.mkdir(data)
    for k, (name, value) in enumerate(inputs.items()):
        write_tensor(os.path.join(data, f"input_{k}.pb"), value, name)
    for k, (name, value) in enumerate(zip(output_names, outputs)):
        write_tensor(os.path.join(data, f"output_{k}.pb"), value, name)


def write_tensor(path, value, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(value.detach().numpy(), name).SerializeToString())


def value_infos(values):
    """Inputs or outputs as {name, dtype, shape}; symbolic dims by name."""
    return [{"name": v.name,
             "dtype": str(onnx.helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)),
             "shape": [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]}
            for v in values]


def write_manifest(path, seed, entries):
    """manifest.json: a header, then one fixture per line (grep- and diff-friendly)."""
    import transformers
    header = {
        "generator": "testdata/pytorch2/gen.py",
        "seed": seed,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "exporters": [{"key": e.key, "dynamo": e.dynamo, "opset": e.opset} for e in EXPORTERS],
        "tolerance": {"rtol": RTOL, "atol": ATOL},
    }
    lines = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in header.items()]
    fixtures = ",\n".join(f"  {json.dumps(e)}" for e in entries)
    with open(path, "w") as f:
        f.write("{\n" + "\n".join(lines) + '\n "fixtures": [\n' + fixtures + "\n ]\n}\n")


if __name__ == "__main__":
    main()
