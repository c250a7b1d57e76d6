// Runs every export that export_onnx.py wrote through ONNX Runtime and
// compares its outputs with PyTorch's (the test_data_set_N/output_K.pb files).
// It checks the fixtures themselves: that each graph, at each opset, static
// and dynamic, computes what the PyTorch module computed.
//
// Usage (onnxruntime-node comes from npm; its install script is not needed):
//
//   npm install --prefix /tmp/ort --ignore-scripts onnxruntime-node@1.30.0
//   node testdata/torch/verify_ort.mjs testdata/onnx /tmp/ort
//
// The second argument is the directory whose node_modules holds
// onnxruntime-node (default: the current directory). Exits 1 on any mismatch.

import fs from "node:fs";
import path from "node:path";
import { loadOrt, readFeeds, readPb } from "./ort_common.mjs";

const [fixtures, ortHome = process.cwd()] = process.argv.slice(2);
if (!fixtures) {
  console.error("usage: node verify_ort.mjs FIXTURES_DIR [DIR_WITH_NODE_MODULES]");
  process.exit(2);
}
const ort = loadOrt(ortHome);

const RTOL = 1e-5;
const ATOL = 1e-6;

// compare counts the values of got off from want's by more than ATOL +
// RTOL·|want|, and finds the largest absolute error.
function compare(got, want) {
  let maxAbs = 0, bad = 0;
  for (let i = 0; i < want.length; i++) {
    const g = Number(got[i]), w = Number(want[i]);
    const err = Math.abs(g - w);
    maxAbs = Math.max(maxAbs, err);
    if (!(err <= ATOL + RTOL * Math.abs(w))) bad++;
  }
  return { maxAbs, bad };
}

const manifest = JSON.parse(fs.readFileSync(path.join(fixtures, "manifest.json"), "utf8"));
let passed = 0, failed = 0;
for (const entry of manifest.cases) {
  const dir = path.join(fixtures, entry.name);
  const session = await ort.InferenceSession.create(path.join(dir, "model.onnx"));
  const problems = [];
  let worst = 0;
  for (const set of fs.readdirSync(dir).filter((d) => d.startsWith("test_data_set_")).sort()) {
    const results = await session.run(readFeeds(ort, path.join(dir, set)));
    for (const f of fs.readdirSync(path.join(dir, set)).filter((f) => f.startsWith("output_")).sort()) {
      const want = readPb(path.join(dir, set, f));
      const got = results[want.name];
      if (!got || got.dims.join() !== want.dims.join()) {
        problems.push(`${set}/${want.name}: shape ${got?.dims} want ${want.dims}`);
        continue;
      }
      const { maxAbs, bad } = compare(got.data, want.data);
      worst = Math.max(worst, maxAbs);
      if (bad) problems.push(`${set}/${want.name}: ${bad} values off, max abs ${maxAbs.toExponential(2)}`);
    }
  }
  if (problems.length) {
    failed++;
    console.log(`FAIL ${entry.name}: ${problems.join("; ")}`);
  } else {
    passed++;
    console.log(`ok   ${entry.name.padEnd(44)} max abs err ${worst.toExponential(2)}`);
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
