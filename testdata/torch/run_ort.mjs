// Runs one ONNX model in ONNX Runtime (onnxruntime-node) on input tensors
// from .npy or .pb (serialized TensorProto) files and writes every output as
// OUT_DIR/<output name>.npy. It is how the export round trip
// (scripts/export_roundtrip.sh) runs attnrun's exports in ONNX Runtime.
//
// Usage:
//
//   node testdata/torch/run_ort.mjs MODEL.onnx [--input FILE]... [--out DIR] [--ort DIR]
//
// Inputs bind to the model's inputs in order, one --input each. --out is
// where the outputs go (default: the current directory); --ort is the
// directory whose node_modules holds onnxruntime-node (default: $ORT_HOME,
// else ~/.cache/attnrun/ort, where scripts/install-reference-tools.sh puts
// it). It prints one line per output (name, type, shape) and exits 1 when
// ONNX Runtime refuses the model or the inputs.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadOrt, readNpy, readPb, writeNpy } from "./ort_common.mjs";

function usage(msg) {
  if (msg) console.error(`run_ort: ${msg}`);
  console.error("usage: node run_ort.mjs MODEL.onnx [--input FILE]... [--out DIR] [--ort DIR]");
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { model: "", inputs: [], out: ".", ort: process.env.ORT_HOME || path.join(os.homedir(), ".cache/attnrun/ort") };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    if (a === "--input") opts.inputs.push(value());
    else if (a === "--out") opts.out = value();
    else if (a === "--ort") opts.ort = value();
    else if (a.startsWith("--")) usage(`unknown flag ${a}`);
    else if (!opts.model) opts.model = a;
    else usage(`unexpected argument ${a}`);
  }
  if (!opts.model) usage("no model given");
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
let ort;
try {
  ort = loadOrt(opts.ort);
} catch (e) {
  if (e.code !== "MODULE_NOT_FOUND") throw e;
  console.error(`run_ort: onnxruntime-node is not installed under ${opts.ort}: ` +
    "bash scripts/install-reference-tools.sh installs it there (or give --ort DIR, or set ORT_HOME)");
  process.exit(1);
}
try {
  const session = await ort.InferenceSession.create(opts.model);
  if (opts.inputs.length !== session.inputNames.length) {
    usage(`${opts.model} takes ${session.inputNames.length} input(s) (${session.inputNames.join(", ")}), got ${opts.inputs.length} --input`);
  }
  const feeds = {};
  opts.inputs.forEach((file, i) => {
    const t = file.endsWith(".pb") ? readPb(file) : readNpy(file);
    feeds[session.inputNames[i]] = new ort.Tensor(t.type, t.data, t.dims);
  });
  const results = await session.run(feeds);
  fs.mkdirSync(opts.out, { recursive: true });
  for (const name of session.outputNames) {
    const t = results[name];
    const file = path.join(opts.out, name.replace(/[^A-Za-z0-9_.-]/g, "_") + ".npy");
    writeNpy(file, t);
    console.log(`${name} ${t.type} [${t.dims.join(", ")}] -> ${file}`);
  }
} catch (err) {
  console.error(`run_ort: ${opts.model}: ${err.message ?? err}`);
  process.exit(1);
}
