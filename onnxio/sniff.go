package onnxio

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// ErrNotONNX is wrapped by the error for a file that is not the ONNX
// message it was read as (a zip, an .npy, text, random bytes).
var ErrNotONNX = errors.New("not an ONNX file")

// magics are the leading bytes of formats that people hand to an ONNX
// reader by mistake. Protobuf has no magic number of its own, so naming
// the format found is the most helpful thing an error can do.
var magics = []struct {
	prefix []byte
	format string
}{
	{[]byte("PK\x03\x04"), "a zip archive (a PyTorch .pt/.pth checkpoint or an .npz?)"},
	{[]byte("PK\x05\x06"), "an empty zip archive"},
	{[]byte("\x93NUMPY"), "a NumPy .npy array"},
	{[]byte("\x1f\x8b"), "a gzip stream"},
	{[]byte("\x89HDF\r\n\x1a\n"), "an HDF5 file (Keras .h5?)"},
	{[]byte("\x80\x02"), "a Python pickle (a legacy PyTorch checkpoint?)"},
	{[]byte("\x80\x03"), "a Python pickle"},
	{[]byte("\x80\x04"), "a Python pickle"},
	{[]byte("\x80\x05"), "a Python pickle"},
	{[]byte("\x7fELF"), "an ELF executable"},
	{[]byte("ir_version"), "the text format of an ONNX model (not the binary protobuf)"},
	{[]byte("<"), "an XML or HTML document"},
}

// sniffFormat names a well-known non-ONNX format the data starts with, or
// returns "" when it recognizes none.
func sniffFormat(data []byte) string {
	for _, m := range magics {
		if bytes.HasPrefix(data, m.prefix) {
			return m.format
		}
	}
	if looksLikeSafetensors(data) {
		return "a safetensors file"
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return "JSON text"
	}
	return ""
}

// looksLikeSafetensors recognizes the safetensors layout: a little-endian
// uint64 header length followed by a JSON object.
func looksLikeSafetensors(data []byte) bool {
	if len(data) < 10 {
		return false
	}
	n := binary.LittleEndian.Uint64(data)
	return n > 1 && n <= uint64(len(data)-8) && data[8] == '{'
}
