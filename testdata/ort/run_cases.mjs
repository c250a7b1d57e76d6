// Runs every case attention_cases.py wrote (every folder under CASES_DIR
// with a model.onnx) through ONNX Runtime and writes
// ONNX Runtime's outputs next to the inputs, turning each case into an ONNX
// test-data set: CASE/test_data_set_0/output_K.pb, in the order of the
// model's outputs, named as the model names them.
//
// Usage (onnxruntime-node comes from npm; its install script is not needed):
//
//   npm install --prefix /tmp/ort --ignore-scripts onnxruntime-node@1.30.0
//   node testdata/ort/run_cases.mjs CASES_DIR /tmp/ort
//
// The second argument is the directory whose node_modules holds
// onnxruntime-node (default: the current directory). A case ONNX Runtime
// refuses is reported as "FAIL case: error" and gets no outputs; the exit
// status is 1 if any case failed.

import fs from "node:fs";
import path from "node:path";
import { encodePb, loadOrt, readFeeds } from "../torch/ort_common.mjs";

const [casesDir, ortHome = process.cwd()] = process.argv.slice(2);
if (!casesDir) {
  console.error("usage: node run_cases.mjs CASES_DIR [DIR_WITH_NODE_MODULES]");
  process.exit(2);
}
const ort = loadOrt(ortHome);

// findCases returns the folders under dir holding a model.onnx, relative to
// casesDir ("attn23_4d", "differs/attn23_qk_mode2_causal").
function findCases(dir) {
  if (fs.existsSync(path.join(dir, "model.onnx"))) return [path.relative(casesDir, dir)];
  return fs.readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith("test_data_set_"))
    .flatMap((e) => findCases(path.join(dir, e.name)));
}

const cases = findCases(casesDir).sort();
let failed = 0;
for (const name of cases) {
  const dir = path.join(casesDir, name);
  const set = path.join(dir, "test_data_set_0");
  try {
    const session = await ort.InferenceSession.create(path.join(dir, "model.onnx"));
    const results = await session.run(readFeeds(ort, set));
    session.outputNames.forEach((output, k) => {
      fs.writeFileSync(path.join(set, `output_${k}.pb`), encodePb(output, results[output]));
    });
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${String(e.message ?? e).split("\n")[0]}`);
  }
}
console.log(`${cases.length - failed} of ${cases.length} cases ran in onnxruntime-node ${ort.env.versions?.common ?? ""}`);
process.exit(failed ? 1 : 0);
