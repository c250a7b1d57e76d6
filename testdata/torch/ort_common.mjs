// What the Node scripts that drive ONNX Runtime share: loading
// onnxruntime-node from the directory npm installed it into, reading and
// writing tensors as serialized TensorProto (.pb, the ONNX test-data
// convention) and as .npy, and reading a test-data set's inputs.
//
// Used by testdata/torch/verify_ort.mjs, testdata/torch/run_ort.mjs and
// testdata/ort/run_cases.mjs. A tensor here is { name, type, data, dims }:
// type is onnxruntime's element type name, data a typed array of it.

import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

// loadOrt returns onnxruntime-node as installed under dir/node_modules
// (`npm install --prefix DIR --ignore-scripts onnxruntime-node@1.30.0`).
export function loadOrt(dir) {
  return createRequire(path.join(path.resolve(dir), "noop.js"))("onnxruntime-node");
}

// Element types by numpy descr and by ONNX data_type: [ort type, array type, bytes].
export const NPY_TYPES = {
  "<f4": ["float32", Float32Array, 4],
  "<f8": ["float64", Float64Array, 8],
  "<i8": ["int64", BigInt64Array, 8],
  "<i4": ["int32", Int32Array, 4],
  "|b1": ["bool", Uint8Array, 1],
  "|u1": ["uint8", Uint8Array, 1],
  "<f2": ["float16", Uint16Array, 2], // the bit patterns, as onnxruntime-node takes them
};
export const ONNX_TYPES = { 1: NPY_TYPES["<f4"], 11: NPY_TYPES["<f8"], 7: NPY_TYPES["<i8"], 6: NPY_TYPES["<i4"], 9: NPY_TYPES["|b1"], 2: NPY_TYPES["|u1"], 10: NPY_TYPES["<f2"] };

// ONNX_CODES is the ONNX data_type of each ort type.
const ONNX_CODES = Object.fromEntries(Object.entries(ONNX_TYPES).map(([code, [type]]) => [type, Number(code)]));

// typed copies little-endian bytes into an aligned typed array.
function typed(Array_, size, bytes) {
  const copy = Uint8Array.from(bytes);
  return new Array_(copy.buffer, 0, copy.length / size);
}

// readPb reads a serialized TensorProto: dims (1), data_type (2), name (8),
// raw_data (9), and the typed fields float_data (4), int64_data (7).
export function readPb(file) {
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

// encodePb serializes an ORT tensor as a TensorProto named name, with the
// fields onnx.numpy_helper.from_array writes: dims, data_type, name and
// raw_data.
export function encodePb(name, tensor) {
  const code = ONNX_CODES[tensor.type];
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

// readNpy reads a C-ordered .npy file of one of NPY_TYPES.
export function readNpy(file) {
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

// writeNpy writes an ORT tensor as a version 1.0 .npy file.
export function writeNpy(file, tensor) {
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

// readFeeds reads the input_K.pb files of a test-data set directory as
// session feeds: ORT tensors by the names the files carry.
export function readFeeds(ort, dir) {
  const feeds = {};
  for (const f of fs.readdirSync(dir).filter((f) => f.startsWith("input_")).sort()) {
    const t = readPb(path.join(dir, f));
    feeds[t.name] = new ort.Tensor(t.type, t.data, t.dims);
  }
  return feeds;
}
