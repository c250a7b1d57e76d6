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
import { createRequire } from "node:module";

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

// Element types by numpy descr and by ONNX data_type: [ort type, array type, bytes].
const NPY_TYPES = {
  "<f4": ["float32", Float32Array, 4],
  "<f8": ["float64", Float64Array, 8],
  "<i8": ["int64", BigInt64Array, 8],
  "<i4": ["int32", Int32Array, 4],
  "|b1": ["bool", Uint8Array, 1],
  "|u1": ["uint8", Uint8Array, 1],
};
const ONNX_TYPES = { 1: NPY_TYPES["<f4"], 11: NPY_TYPES["<f8"], 7: NPY_TYPES["<i8"], 6: NPY_TYPES["<i4"], 9: NPY_TYPES["|b1"], 2: NPY_TYPES["|u1"] };

// typed copies little-endian bytes into an aligned typed array.
function typed(Array_, size, bytes) {
  const copy = Uint8Array.from(bytes);
  return new Array_(copy.buffer, 0, copy.length / size);
}

// readNpy reads a C-ordered .npy file of one of NPY_TYPES.
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString("latin1", 0, 6) !== "\x93NUMPY") throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString("latin1", start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order':\s*(True|False)/.exec(header)?.[1];
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (!descr || !fortran || shapeText === undefined) throw new Error(`${file}: malformed .npy header ${header.trim()}`);
  if (fortran === "True") throw new Error(`${file}: Fortran-ordered arrays are not supported`);
  const [type, Array_, size] = NPY_TYPES[descr] ?? [];
  if (!type) throw new Error(`${file}: dtype ${descr} is not supported (want ${Object.keys(NPY_TYPES).join(", ")})`);
  const dims = shapeText.split(",").map((s) => s.trim()).filter(Boolean).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const data = buf.subarray(start + headerLen, start + headerLen + count * size);
  if (data.length !== count * size) throw new Error(`${file}: ${data.length} data bytes, shape (${dims}) needs ${count * size}`);
  return { name: "", type, data: typed(Array_, size, data), dims };
}

// readPb reads a serialized TensorProto: dims (1), data_type (2), name (8),
// raw_data (9), and the typed fields float_data (4), int64_data (7).
function readPb(file) {
  const buf = fs.readFileSync(file);
  let pos = 0;
  const varint = () => {
    let result = 0n, shift = 0n, byte;
    do {
      if (pos >= buf.length) throw new Error(`${file}: truncated`);
      byte = buf[pos++];
      result |= BigInt(byte & 0x7f) << shift;
      shift += 7n;
    } while (byte & 0x80);
    return result;
  };
  const dims = [], floats = [], ints = [];
  let dataType = 0, name = "", raw = null;
  while (pos < buf.length) {
    const key = Number(varint());
    const field = key >> 3, wire = key & 7;
    if (wire === 0) {
      const v = varint();
      if (field === 1) dims.push(Number(v));
      else if (field === 2) dataType = Number(v);
      else if (field === 7) ints.push(BigInt.asIntN(64, v));
    } else if (wire === 2) {
      const len = Number(varint());
      const bytes = buf.subarray(pos, pos + len);
      const end = pos + len;
      if (field === 8) name = bytes.toString("utf8");
      else if (field === 9) raw = bytes;
      else if (field === 1) while (pos < end) dims.push(Number(varint()));
      else if (field === 7) while (pos < end) ints.push(BigInt.asIntN(64, varint()));
      else if (field === 4) for (let i = 0; i < len; i += 4) floats.push(bytes.readFloatLE(i));
      pos = end;
    } else if (wire === 5) {
      if (field === 4) floats.push(buf.readFloatLE(pos));
      pos += 4;
    } else if (wire === 1) pos += 8;
    else throw new Error(`${file}: unsupported protobuf wire type ${wire}`);
  }
  const [type, Array_, size] = ONNX_TYPES[dataType] ?? [];
  if (!type) throw new Error(`${file}: TensorProto data_type ${dataType} is not supported`);
  let data;
  if (raw) data = typed(Array_, size, raw);
  else if (type === "float32") data = Float32Array.from(floats);
  else if (type === "int64") data = BigInt64Array.from(ints);
  else throw new Error(`${file}: ${type} tensor without raw_data is not supported`);
  return { name, type, data, dims };
}

// writeNpy writes an ORT output tensor as a version 1.0 .npy file.
function writeNpy(file, tensor) {
  const descr = Object.entries(NPY_TYPES).find(([, [type]]) => type === tensor.type)?.[0];
  if (!descr) throw new Error(`output type ${tensor.type} cannot be written as .npy`);
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(", ")})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const total = 10 + header.length + 1;
  header += " ".repeat((64 - (total % 64)) % 64) + "\n";
  const prefix = Buffer.alloc(10);
  prefix.write("\x93NUMPY", 0, "latin1");
  prefix[6] = 1;
  prefix[7] = 0;
  prefix.writeUInt16LE(header.length, 8);
  const data = tensor.data;
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([prefix, Buffer.from(header, "latin1"), body]));
}

const opts = parseArgs(process.argv.slice(2));
const ort = createRequire(path.join(path.resolve(opts.ort), "noop.js"))("onnxruntime-node");
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
