// Package onnxio reads and writes ONNX models and tensors: attnrun's own
// ONNX codec.
//
// The codec decodes a .onnx file into the messages of package onnxpb (a
// subset of the ONNX schema generated from our own .proto, with every field
// attnrun uses and every other field kept as unknown data), validates it,
// and encodes it back:
//
//   - Sizes read from a file are checked against Limits before anything is
//     allocated: file size, rank, element count (without overflow) and bytes
//     per tensor. A 40-byte file cannot make the reader allocate 2^60 floats.
//   - Every tensor is checked against its shape: raw_data must hold exactly
//     dims × element size bytes, a typed field (float_data, int64_data, ...)
//     exactly as many values as elements.
//   - What a call reads into memory (the file, external data, a test-data
//     set, a converted tensor) is reserved from a memory budget first
//     (Limits.MaxMemory, 4 GiB by default, or a shared Limits.Budget).
//   - Only regular files are opened: a FIFO, device or directory is refused
//     without blocking.
//   - External data (tensors whose bytes live in a file next to the model)
//     is loaded into raw_data, following "location", "offset" and "length";
//     a location may not leave the model's directory, and every entry is
//     checked against its file before any is read (4 GiB per model by
//     default). Limits.ExternalSizesOnly checks the entries without reading
//     them, to describe a model without loading its weights.
//   - Encoding is deterministic: a model attnrun writes, read back and
//     written again, is the same bytes. Files are written atomically
//     (internal/atomicfile: fsync, rename, umask honoured).
//   - Errors name the file, the tensor or node, and what was expected; a
//     zip, .npy or pickle file handed over as a model is named as such.
//
// TensorToDense and DenseToTensor convert between TensorProto and the
// *tensor.Dense the rest of attnrun computes with. ReadDataSet and
// WriteDataSet handle ONNX test-data sets (test_data_set_N/input_K.pb,
// output_K.pb), the reference inputs and outputs every cross-check uses.
//
// # Why not onnx-go
//
// github.com/owulveryck/onnx-go v0.5.0, the last release (2019, now
// unmaintained), is not on attnrun's import path because it cannot read
// what PyTorch writes for attention modules, nor write anything:
//
//   - it panics on a BOOL initializer stored as raw_data, reading 8 bytes
//     per element; every PyTorch export of a causal mask has one;
//   - it cannot encode ONNX;
//   - it drops opset_import, so operator semantics that changed between
//     opsets (Softmax before and after opset 13) cannot be honored, and it
//     drops symbolic dimensions, so dynamic batch and sequence axes are lost;
//   - it has no float16 and no external data;
//   - its gorgonnx backend lacks Shape, Gather, Where and Trilu, and
//     computes Softmax(axis=-1) on 3-D input wrongly.
//
// It remains a compatibility target: what attnrun exports must decode in it,
// which onnxio/export's onnxgo_test.go checks on every export path (presets,
// every layer's exporter, the Attention op, attnrun import's files);
// onnxgo_compat_test.go pins down its defects. Our proto package is named
// attnrun.onnxsubset, not onnx, so that both can link into one binary
// (two registrations of one protobuf name panic at start-up).
package onnxio
