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
import { createRequire } from "node:module";

const [casesDir, ortHome = process.cwd()] = process.argv.slice(2);
if (!casesDir) {
  console.error("usage: node run_cases.mjs CASES_DIR [DIR_WITH_NODE_MODULES]");
  process.exit(2);
}
const ort = createRequire(path.join(path.resolve(ortHome), "noop.js"))("onnxruntime-node");

// The element types the cases use: ONNX data_type code to the onnxruntime
// type name, the typed array holding it and its size in bytes.
const DTYPES = {
  1: ["float32", Float32Array, 4],
  6: ["int32", Int32Array, 4],
  7: ["int64", BigInt64Array, 8],
  9: ["bool", Uint8Array, 1],
};
const CODES = Object.fromEntries(Object.entries(DTYPES).map(([code, [type]]) => [type, Number(code)]));

// readTensor decodes the TensorProto fields numpy_helper.from_array writes:
// dims (1), data_type (2), name (8) and raw_data (9).
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
        const end = pos;
        pos -= len;
        while (pos < end) dims.push(Number(varint()));
      }
    } else if (wire === 5) pos += 4;
    else if (wire === 1) pos += 8;
    else throw new Error(`${file}: unsupported wire type ${wire}`);
  }
  const [type, Array_, size] = DTYPES[dataType] ?? [];
  if (!type) throw new Error(`${file}: unsupported data_type ${dataType}`);
  const copy = Uint8Array.from(raw ?? []); // an aligned copy of the little-endian bytes
  return { name, tensor: new ort.Tensor(type, new Array_(copy.buffer, 0, copy.length / size), dims) };
}

// encodeTensor writes a TensorProto with the same four fields.
function encodeTensor(name, tensor) {
  const code = CODES[tensor.type];
  if (!code) throw new Error(`output ${name}: unsupported type ${tensor.type}`);
  const parts = [];
  const varint = (n) => {
    const out = [];
    let v = BigInt(n);
    do {
      let byte = Number(v & 0x7fn);
      v >>= 7n;
      if (v) byte |= 0x80;
      out.push(byte);
    } while (v);
    return Buffer.from(out);
  };
  const bytesField = (field, bytes) => parts.push(varint((field << 3) | 2), varint(bytes.length), bytes);
  for (const d of tensor.dims) parts.push(varint(1 << 3), varint(d));
  parts.push(varint(2 << 3), varint(code));
  bytesField(8, Buffer.from(name, "utf8"));
  const data = tensor.data;
  bytesField(9, Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  return Buffer.concat(parts);
}

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
    const feeds = {};
    for (const f of fs.readdirSync(set).filter((f) => f.startsWith("input_"))) {
      const { name: input, tensor } = readTensor(path.join(set, f));
      feeds[input] = tensor;
    }
    const results = await session.run(feeds);
    session.outputNames.forEach((output, k) => {
      fs.writeFileSync(path.join(set, `output_${k}.pb`), encodeTensor(output, results[output]));
    });
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${String(e.message ?? e).split("\n")[0]}`);
  }
}
console.log(`${cases.length - failed} of ${cases.length} cases ran in onnxruntime-node ${ort.env.versions?.common ?? ""}`);
process.exit(failed ? 1 : 0);
