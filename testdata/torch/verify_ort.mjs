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
import { createRequire } from "node:module";

const [fixtures, ortHome = process.cwd()] = process.argv.slice(2);
if (!fixtures) {
  console.error("usage: node verify_ort.mjs FIXTURES_DIR [DIR_WITH_NODE_MODULES]");
  process.exit(2);
}
const ort = createRequire(path.join(path.resolve(ortHome), "noop.js"))("onnxruntime-node");

const RTOL = 1e-5;
const ATOL = 1e-6;

// TensorProto, as far as onnx.numpy_helper.from_array writes it: dims (1),
// data_type (2), name (8), raw_data (9). Other fields are skipped.
const DTYPES = { 1: ["float32", Float32Array, 4], 7: ["int64", BigInt64Array, 8], 9: ["bool", Uint8Array, 1] };

function readTensor(file) {
  const buf = fs.readFileSync(file);
  let pos = 0;
  const varint = () => {
    let result = 0n, shift = 0n, byte;
    do {
      byte = buf[pos++];
      result |= BigInt(byte & 0x7f) << shift;
      shift += 7n;
    } while (byte & 0x80);
    return result;
  };
  const dims = [];
  let dataType = 0, name = "", raw = null;
  while (pos < buf.length) {
    const key = Number(varint());
    const field = key >> 3, wire = key & 7;
    if (wire === 0) {
      const v = varint();
      if (field === 1) dims.push(Number(v));
      else if (field === 2) dataType = Number(v);
    } else if (wire === 2) {
      const len = Number(varint());
      const bytes = buf.subarray(pos, pos + len);
      pos += len;
      if (field === 8) name = bytes.toString("utf8");
      else if (field === 9) raw = bytes;
      else if (field === 1) { // packed dims
        const end = pos; pos -= len;
        while (pos < end) dims.push(Number(varint()));
      }
    } else if (wire === 5) pos += 4;
    else if (wire === 1) pos += 8;
    else throw new Error(`${file}: unsupported wire type ${wire}`);
  }
  const [type, Array_, size] = DTYPES[dataType] ?? [];
  if (!type) throw new Error(`${file}: unsupported data_type ${dataType}`);
  const copy = Uint8Array.from(raw ?? []); // aligned copy of the little-endian bytes
  return { name, tensor: new ort.Tensor(type, new Array_(copy.buffer, 0, copy.length / size), dims) };
}

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
    const files = fs.readdirSync(path.join(dir, set)).sort();
    const feeds = {};
    for (const f of files.filter((f) => f.startsWith("input_"))) {
      const { name, tensor } = readTensor(path.join(dir, set, f));
      feeds[name] = tensor;
    }
    const results = await session.run(feeds);
    for (const f of files.filter((f) => f.startsWith("output_"))) {
      const { name, tensor } = readTensor(path.join(dir, set, f));
      const got = results[name];
      if (!got || got.dims.join() !== tensor.dims.join()) {
        problems.push(`${set}/${name}: shape ${got?.dims} want ${tensor.dims}`);
        continue;
      }
      const { maxAbs, bad } = compare(got.data, tensor.data);
      worst = Math.max(worst, maxAbs);
      if (bad) problems.push(`${set}/${name}: ${bad} values off, max abs ${maxAbs.toExponential(2)}`);
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
