package onnxio

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// fuzzLimits keep the fuzzer's allocations small, so that what it finds is
// a missed check, not a slow run.
var fuzzLimits = Limits{MaxFileBytes: 1 << 20, MaxTensorBytes: 1 << 20, MaxExternalBytes: 1 << 20, MaxDims: 8}

// FuzzDecodeModel feeds arbitrary bytes to the model decoder. Whatever it
// decodes must convert without panicking and re-encode stably. The model
// directory is testdata/external, so external data entries are exercised
// too (and can only reach files in that directory).
//
//	go test ./onnxio -run '^$' -fuzz FuzzDecodeModel -fuzztime 30s
func FuzzDecodeModel(f *testing.F) {
	seeds := [][]byte{
		mustEncode(f, smallModel(f)),
		mustEncode(f, boolMaskModel(f)),
		nil,
		[]byte("PK\x03\x04"),
		[]byte("\x93NUMPY\x01\x00"),
	}
	if ext, err := os.ReadFile(filepath.Join("testdata", "external", "model.onnx")); err == nil {
		seeds = append(seeds, ext)
	}
	valid := seeds[0]
	seeds = append(seeds, valid[:len(valid)/2], valid[:len(valid)-1])
	for _, at := range []int{0, 3, len(valid) / 3, len(valid) - 10} {
		flipped := bytes.Clone(valid)
		flipped[at] ^= 0x5a
		seeds = append(seeds, flipped)
	}
	for _, s := range seeds {
		f.Add(s)
	}
	dir := filepath.Join("testdata", "external")

	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeModel(data, dir, fuzzLimits)
		if err != nil {
			if m != nil {
				t.Fatal("a model returned with an error")
			}
			return
		}
		_ = walkModelTensors(m, func(_ string, tp *onnxpb.TensorProto) error {
			_, _ = fuzzLimits.TensorToDense(tp)
			return nil
		})
		for _, vi := range m.GetGraph().GetInput() {
			_ = FormatDims(Dims(vi))
		}
		first, err := EncodeModel(m)
		if err != nil {
			t.Fatalf("decoded model does not encode: %v", err)
		}
		again, err := DecodeModel(first, dir, fuzzLimits)
		if err != nil {
			t.Fatalf("re-encoded model does not decode: %v", err)
		}
		second, err := EncodeModel(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Fatal("encoding is not stable across a round trip")
		}
	})
}

// FuzzDecodeTensor does the same for test-data tensor files.
//
//	go test ./onnxio -run '^$' -fuzz FuzzDecodeTensor -fuzztime 30s
func FuzzDecodeTensor(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "tensors", "*.pb"))
	for _, path := range files {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tp, err := DecodeTensor(data, fuzzLimits)
		if err != nil {
			return
		}
		_, _ = fuzzLimits.TensorToDense(tp)
		if _, err := EncodeTensor(tp); err != nil {
			t.Fatalf("decoded tensor does not encode: %v", err)
		}
	})
}
