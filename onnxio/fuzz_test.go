package onnxio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"
)

// fuzzLimits keep the fuzzer's allocations small, so that what it finds is
// a missed check, not a slow run.
var fuzzLimits = Limits{MaxFileBytes: 1 << 20, MaxTensorBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxDims: 8}

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

// fuzzFile is one entry of a test-data directory built from fuzz bytes.
type fuzzFile struct {
	name byte // see fuzzFileName
	data []byte
}

// fuzzSpecialNames are what name bytes from 0xf0 up become: indices that
// used to size allocations or overflow, names the reader must ignore, and
// entries that are not regular files.
var fuzzSpecialNames = []string{
	"input_2000000000.pb",
	"output_9223372036854775806.pb",
	"input_9223372036854775807.pb",
	"output_99999999999999999999.pb",
	"input_01.pb",
	"input_-1.pb",
	"notes.txt",
	"dir:input_0.pb",      // a directory with a data file's name
	"dir:output_1.pb",     //
	"link:input_2.pb",     // a symbolic link to an input file
	"link:output_0.pb",    //
	"dangling:input_3.pb", // a symbolic link to nothing
}

// fuzzFileName names the entry for a name byte: below 0xf0, input_K.pb or
// output_K.pb with K in 0..7 (so sets with gaps and duplicates arise), else
// one of fuzzSpecialNames.
func fuzzFileName(b byte) string {
	if b >= 0xf0 {
		return fuzzSpecialNames[int(b-0xf0)%len(fuzzSpecialNames)]
	}
	return fmt.Sprintf("%s_%d.pb", [2]string{"input", "output"}[b&1], (b>>1)&7)
}

// encodeFuzzFiles lays files out as the fuzz target reads them: per file a
// name byte, a little-endian uint16 length, and the contents.
func encodeFuzzFiles(files []fuzzFile) []byte {
	var out []byte
	for _, f := range files {
		out = append(out, f.name)
		out = binary.LittleEndian.AppendUint16(out, uint16(len(f.data)))
		out = append(out, f.data...)
	}
	return out
}

// decodeFuzzFiles is the inverse of encodeFuzzFiles; a short tail becomes
// a last, shorter file.
func decodeFuzzFiles(data []byte) []fuzzFile {
	var files []fuzzFile
	for len(data) > 0 && len(files) < 16 {
		f := fuzzFile{name: data[0]}
		data = data[1:]
		n := 0
		if len(data) >= 2 {
			n = int(binary.LittleEndian.Uint16(data))
			data = data[2:]
		}
		n = min(n, len(data))
		f.data, data = data[:n], data[n:]
		files = append(files, f)
	}
	return files
}

// writeFuzzDir creates the entries in dir.
func writeFuzzDir(t *testing.T, dir string, files []fuzzFile) {
	for _, f := range files {
		name := fuzzFileName(f.name)
		kind, base, special := strings.Cut(name, ":")
		if !special {
			base = name
		}
		path := filepath.Join(dir, base)
		os.RemoveAll(path)
		var err error
		switch {
		case !special:
			err = os.WriteFile(path, f.data, 0o644)
		case kind == "dir":
			err = os.Mkdir(path, 0o755)
		case kind == "link":
			err = os.Symlink("input_0.pb", path)
		case kind == "dangling":
			err = os.Symlink("absent.pb", path)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzReadDataSet builds a test-data directory from the fuzz bytes (several
// input_K.pb/output_K.pb files, hostile names, directories and links among
// them) and reads it. Whatever it reads must match the files present,
// convert without panicking, and survive a write and read back; the read
// must stay within the limits' allocation.
//
//	go test ./onnxio -run '^$' -fuzz FuzzReadDataSet -fuzztime 10m -parallel 1
func FuzzReadDataSet(f *testing.F) {
	x := mustEncodeTensor(f, floatTensor(f, "x", []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}))
	y := mustEncodeTensor(f, floatTensor(f, "y", []int{2}, []float32{0.25, 0.75}))
	mask, err := DenseToTensor("mask", tensor.New(tensor.WithShape(2), tensor.WithBacking([]bool{true, false})))
	if err != nil {
		f.Fatal(err)
	}
	m := mustEncodeTensor(f, mask)
	for _, files := range [][]fuzzFile{
		{{0, x}, {1, y}},                   // input_0, output_0
		{{0, x}, {2, m}, {1, y}, {3, y}},   // two inputs, two outputs
		{{0, x}, {4, x}},                   // a gap: input_0, input_2
		{{0xf0, nil}},                      // input_2000000000.pb, empty
		{{0, x}, {0xf2, x}},                // input_9223372036854775807.pb
		{{0xf1, nil}, {0xf3, nil}},         // overflowing indices
		{{0, x}, {0xf7, nil}, {1, y}},      // a directory input_0.pb
		{{0, x}, {0xf9, nil}, {2, x}},      // input_2.pb links to input_0.pb
		{{0xfb, nil}},                      // a dangling link
		{{0, x[:len(x)-1]}, {1, y}},        // truncated
		{{0, []byte("\x93NUMPY\x01\x00")}}, // another format
		{{0xf6, x}, {0xf4, x}},             // ignored names only
	} {
		f.Add(encodeFuzzFiles(files))
	}
	for _, name := range []string{"float32_raw.pb", "bool_typed.pb", "float16_raw.pb"} {
		if data, err := os.ReadFile(filepath.Join("testdata", "tensors", name)); err == nil {
			f.Add(encodeFuzzFiles([]fuzzFile{{0, data}, {1, data}}))
		}
	}
	lim := fuzzLimits
	lim.MaxMemory = 1 << 20

	f.Fuzz(func(t *testing.T, data []byte) {
		files := decodeFuzzFiles(data)
		dir := t.TempDir()
		writeFuzzDir(t, dir, files)
		before := heapAllocated()
		ds, err := lim.ReadDataSet(dir)
		if used := heapAllocated() - before; used > uint64(4*lim.MaxMemory)+8*uint64(len(data))+1<<20 {
			t.Fatalf("reading %d bytes of files allocated %d bytes", len(data), used)
		}
		if err != nil {
			if ds != nil {
				t.Fatal("a data set returned with an error")
			}
			return
		}
		for _, tp := range append(slices.Clone(ds.Inputs), ds.Outputs...) {
			_, _ = lim.TensorToDense(tp)
		}
		// What was read is exactly the numbered files present
		// (directories with such names are not data files).
		for prefix, tensors := range map[string][]*onnxpb.TensorProto{"input": ds.Inputs, "output": ds.Outputs} {
			for k := range len(tensors) + 1 {
				info, err := os.Lstat(filepath.Join(dir, fmt.Sprintf("%s_%d.pb", prefix, k)))
				if present := err == nil && !info.IsDir(); present != (k < len(tensors)) {
					t.Fatalf("%s_%d.pb present: %v, but the set has %d %ss", prefix, k, present, len(tensors), prefix)
				}
			}
		}
		again := filepath.Join(t.TempDir(), "again")
		if err := WriteDataSet(again, ds); err != nil {
			t.Fatalf("a set that was read does not write: %v", err)
		}
		back, err := lim.ReadDataSet(again)
		if err != nil {
			t.Fatalf("a set that was written does not read back: %v", err)
		}
		if len(back.Inputs) != len(ds.Inputs) || len(back.Outputs) != len(ds.Outputs) {
			t.Fatal("the set changed size in a round trip")
		}
		for i := range ds.Inputs {
			if !proto.Equal(ds.Inputs[i], back.Inputs[i]) {
				t.Fatalf("input %d changed in a round trip", i)
			}
		}
		for i := range ds.Outputs {
			if !proto.Equal(ds.Outputs[i], back.Outputs[i]) {
				t.Fatalf("output %d changed in a round trip", i)
			}
		}
	})
}
