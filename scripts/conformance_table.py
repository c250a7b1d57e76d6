"""Writes docs/conformance.md from a run of ../shared/conformance/run.sh.

usage: python3 scripts/conformance_table.py RUN_OUTPUT > docs/conformance.md

RUN_OUTPUT holds the runner's PASS/FAIL lines. Each node test counts under
every op its model uses (subgraphs included); ONNX Runtime 1.30's status
comes from reference-ort-1.30.txt beside the runner. Every failing test is
listed with the last line attnrun printed for it.
"""
import collections
import os
import sys

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "shared", "conformance")
TESTS = os.path.join(SHARED, "onnx-node-tests")


def ops_of(name):
    model = onnx.load(os.path.join(TESTS, name, "model.onnx"), load_external_data=False)
    found = set()

    def walk(graph):
        for node in graph.node:
            found.add(node.op_type if node.domain in ("", "ai.onnx") else node.domain + "." + node.op_type)
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)
                for g in attr.graphs:
                    walk(g)

    walk(model.graph)
    return found


def main(run_output):
    status, reason = {}, {}
    for line in open(run_output):
        parts = line.rstrip("\n").split(" ", 2)
        if len(parts) >= 2 and parts[0] in ("PASS", "FAIL"):
            status[parts[1]] = parts[0]
            if parts[0] == "FAIL":
                reason[parts[1]] = parts[2].replace("attnrun: ", "") if len(parts) > 2 else ""
    ort = {}
    for line in open(os.path.join(SHARED, "reference-ort-1.30.txt")):
        parts = line.split()
        if len(parts) >= 2:
            ort[parts[1]] = parts[0]
    per_op = collections.defaultdict(lambda: [0, 0, 0])
    for name in status:
        for op in ops_of(name):
            per_op[op][0] += status[name] == "PASS"
            per_op[op][1] += 1
            per_op[op][2] += ort.get(name) == "PASS"
    passed = sum(s == "PASS" for s in status.values())
    out = sys.stdout
    out.write("# ONNX node tests\n\n")
    out.write("ONNX's 1,802 backend node tests (`../shared/conformance`, opsets to 28), run by\n")
    out.write("`../shared/conformance/run.sh` at ONNX's runner tolerance (rtol 1e-3, atol 1e-5).\n")
    out.write("This page is written by `scripts/conformance_table.py` from that run.\n\n")
    out.write(f"attnrun: **{passed} of {len(status)}** pass; ONNX Runtime 1.30: "
              f"{sum(v == 'PASS' for k, v in ort.items() if k in status)}.\n\n")
    out.write("A test counts under every op its model uses, subgraphs included.\n\n")
    out.write("| op | attnrun passes | tests | ONNX Runtime 1.30 passes |\n|---|---:|---:|---:|\n")
    for op in sorted(per_op):
        p, t, o = per_op[op]
        out.write(f"| {op} | {p} | {t} | {o} |\n")
    out.write("\n## Tests attnrun does not pass, and why\n\n")
    out.write("The reason is the last line attnrun printed. None is a wrong number in an op\n")
    out.write("attnrun implements, but for `test_maxunpool_export_with_output_shape`, whose\n")
    out.write("expected output decodes the indices in the shape inferred without\n")
    out.write("`output_shape`; attnrun follows ONNX Runtime and PyTorch (ONNX Runtime fails it\n")
    out.write("too).\n\n")
    for name in sorted(reason):
        text = reason[name].replace("|", "\\|")
        if len(text) > 220:
            text = text[:220] + "…"
        out.write(f"- `{name}` (ONNX Runtime: {ort.get(name, '?')}): {text}\n")


if __name__ == "__main__":
    main(sys.argv[1])
