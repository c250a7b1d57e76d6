// Runs files `attnrun import` wrote in ONNX Runtime as drop-in replacements
// for the PyTorch exports they were lifted from (scripts/lifted_ort.sh
// drives it). For each pair SOURCE_DIR LIFTED.onnx:
//
//   - ONNX Runtime must read the same interface from both files: input and
//     output names in order, element types, and every dimension, fixed or
//     symbolic (InferenceSession.inputMetadata, outputMetadata);
//   - on every SOURCE_DIR/test_data_set_N, the lifted file is fed the
//     source's inputs as they are (input_K.pb binds to the source's K-th
//     input, by name) and must give the source's outputs (output_K.pb, the
//     source's K-th output by name): the same shape, and values within
//     1e-5 relative, 1e-6 absolute (NaN where PyTorch has NaN).
//
// Usage:
//
//   node scripts/lifted_ort.mjs ORT_HOME SOURCE_DIR LIFTED.onnx [SOURCE_DIR LIFTED.onnx]...
//
// ORT_HOME is the directory whose node_modules holds onnxruntime-node. It
// prints `ok NAME max_abs=...` or `FAIL NAME: problems` per pair, NAME being
// SOURCE_DIR's base name, then "N passed, M failed"; exits 1 on any failure.

import fs from "node:fs";
import path from "node:path";
import { loadOrt, readPb } from "../testdata/torch/ort_common.mjs";

const [ortHome, ...pairs] = process.argv.slice(2);
if (!ortHome || pairs.length === 0 || pairs.length % 2) {
  console.error("usage: node lifted_ort.mjs ORT_HOME SOURCE_DIR LIFTED.onnx [SOURCE_DIR LIFTED.onnx]...");
  process.exit(2);
}
const ort = loadOrt(ortHome);

// QUIET keeps ONNX Runtime's warnings (unused initializers) out of the
// report: errors only.
const QUIET = { logSeverityLevel: 3 };

const RTOL = 1e-5;
const ATOL = 1e-6;

// numbered lists the files PREFIX_K.pb of a directory in order of K.
function numbered(dir, prefix) {
  const files = fs.readdirSync(dir).filter((f) => new RegExp(`^${prefix}_\\d+\\.pb$`).test(f));
  return files.sort((a, b) => Number(a.match(/\d+/)[0]) - Number(b.match(/\d+/)[0])).map((f) => path.join(dir, f));
}

// describe prints value metadata as "x float32[batch,seq,8]".
function describe(meta) {
  return meta.map((m) => `${m.name} ${m.type}[${m.shape}]`).join(", ");
}

// compare checks got against want: shape, then every value.
function compare(got, want) {
  if (!got) return { problem: "missing" };
  if (got.dims.join() !== want.dims.join()) return { problem: `shape [${got.dims}], want [${want.dims}]` };
  let maxAbs = 0, bad = 0;
  for (let i = 0; i < want.data.length; i++) {
    const g = Number(got.data[i]), w = Number(want.data[i]);
    if (Number.isNaN(w) && Number.isNaN(g)) continue;
    const err = Math.abs(g - w);
    if (!(err <= ATOL + RTOL * Math.abs(w))) bad++;
    else maxAbs = Math.max(maxAbs, err);
  }
  return { maxAbs, problem: bad ? `${bad} of ${want.data.length} values off` : "" };
}

// check runs one lifted file against its source and lists the problems.
async function check(sourceDir, lifted) {
  const source = await ort.InferenceSession.create(path.join(sourceDir, "model.onnx"), QUIET);
  const session = await ort.InferenceSession.create(lifted, QUIET);
  const problems = [];
  for (const side of ["inputMetadata", "outputMetadata"]) {
    const want = describe(source[side]), got = describe(session[side]);
    if (want !== got) problems.push(`${side === "inputMetadata" ? "inputs" : "outputs"} (${got}), source (${want})`);
  }
  let worst = 0, sets = 0;
  for (const set of fs.readdirSync(sourceDir).filter((d) => d.startsWith("test_data_set_")).sort()) {
    const dir = path.join(sourceDir, set);
    sets++;
    const feeds = {};
    numbered(dir, "input").forEach((file, k) => {
      const t = readPb(file);
      feeds[source.inputNames[k]] = new ort.Tensor(t.type, t.data, t.dims);
    });
    let results;
    try {
      results = await session.run(feeds);
    } catch (err) {
      problems.push(`${set}: ${String(err.message ?? err).split("\n")[0]}`);
      continue;
    }
    numbered(dir, "output").forEach((file, k) => {
      const name = source.outputNames[k];
      const { maxAbs = 0, problem } = compare(results[name], readPb(file));
      worst = Math.max(worst, maxAbs);
      if (problem) problems.push(`${set}/${name}: ${problem}`);
    });
  }
  if (sets === 0) problems.push("no test_data_set_N");
  return { problems, worst };
}

let passed = 0, failed = 0;
for (let i = 0; i < pairs.length; i += 2) {
  const name = path.basename(pairs[i]);
  let outcome;
  try {
    outcome = await check(pairs[i], pairs[i + 1]);
  } catch (err) {
    outcome = { problems: [String(err.message ?? err).split("\n")[0]], worst: 0 };
  }
  if (outcome.problems.length) {
    failed++;
    console.log(`FAIL ${name}: ${outcome.problems.join("; ")}`);
  } else {
    passed++;
    console.log(`ok ${name} max_abs=${outcome.worst.toExponential(2)}`);
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
