package onnxio

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// TestExternalDataReference reads the model the onnx Python package saved
// with save_as_external_data: W (3, 4) at offset 0 and b (4) at offset 48
// of weights.bin.
func TestExternalDataReference(t *testing.T) {
	m, err := ReadModel(filepath.Join("testdata", "external", "model.onnx"))
	require.NoError(t, err)
	inits := m.Graph.Initializer
	require.Len(t, inits, 2)
	for _, tp := range inits {
		assert.False(t, isExternal(tp), "%s should be loaded", tp.GetName())
		assert.Empty(t, tp.ExternalData)
	}
	w, err := TensorToDense(inits[0])
	require.NoError(t, err)
	want := make([]float32, 12)
	for i := range want {
		want[i] = float32(i) / 8
	}
	assert.Equal(t, want, w.Data())
	b, err := TensorToDense(inits[1])
	require.NoError(t, err)
	assert.Equal(t, []float32{0.5, -1, 2, -4}, b.Data())

	dims := Dims(m.Graph.Input[0])
	assert.Equal(t, []Dim{SymbolicDim("batch"), FixedDim(3)}, dims)
	assert.EqualValues(t, 17, OpsetVersion(m, ""))
}

// externalModel writes a model whose initializer W (2, 2) lives in
// dir/location at offset 8 (after 8 bytes of padding), with the given
// external_data entries overriding the defaults.
func externalModel(t *testing.T, dir, location string, override map[string]string) []byte {
	t.Helper()
	weights := make([]byte, 8+16)
	for i, v := range []float32{1.5, -2, 3.25, 4} {
		binary.LittleEndian.PutUint32(weights[8+4*i:], math.Float32bits(v))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "weights.bin"), weights, 0o644))

	entries := map[string]string{"location": location, "offset": "8", "length": "16"}
	for k, v := range override {
		entries[k] = v
	}
	w := &onnxpb.TensorProto{
		Name: proto.String("W"), DataType: proto.Int32(int32(Float)), Dims: []int64{2, 2},
		DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
	}
	for _, k := range []string{"location", "offset", "length"} {
		if v, ok := entries[k]; ok && v != "-" {
			w.ExternalData = append(w.ExternalData, &onnxpb.StringStringEntryProto{Key: proto.String(k), Value: proto.String(v)})
		}
	}
	m := smallModel(t)
	m.Graph.Initializer = []*onnxpb.TensorProto{w}
	return mustEncode(t, m)
}

func TestExternalDataWrittenByUs(t *testing.T) {
	dir := t.TempDir()
	data := externalModel(t, dir, "weights.bin", nil)
	path := filepath.Join(dir, "model.onnx")
	require.NoError(t, os.WriteFile(path, data, 0o644))

	m, err := ReadModel(path)
	require.NoError(t, err)
	w, err := TensorToDense(m.Graph.Initializer[0])
	require.NoError(t, err)
	assert.Equal(t, []float32{1.5, -2, 3.25, 4}, w.Data())

	// Written back, the model is self-contained.
	inline := filepath.Join(t.TempDir(), "inline.onnx")
	require.NoError(t, WriteModel(inline, m))
	again, err := ReadModel(inline)
	require.NoError(t, err)
	assert.True(t, proto.Equal(m, again))

	// Without a length entry, the data runs to the end of the file.
	data = externalModel(t, dir, "weights.bin", map[string]string{"length": "-"})
	_, err = DecodeModel(data, dir, DefaultLimits)
	require.NoError(t, err)
}

// TestExternalDataWithInlineData refuses an external tensor that also
// carries inline data: loading would give it two sources (a fuzz finding).
func TestExternalDataWithInlineData(t *testing.T) {
	dir := t.TempDir()
	m := &onnxpb.ModelProto{}
	require.NoError(t, proto.Unmarshal(externalModel(t, dir, "weights.bin", nil), m))
	m.Graph.Initializer[0].StringData = [][]byte{[]byte("x")}
	_, err := DecodeModel(mustEncode(t, m), dir, DefaultLimits)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `initializer "W" (FLOAT [2 2]): keeps its data in an external file but also holds string_data`)
}

func TestExternalDataBadInput(t *testing.T) {
	tests := []struct {
		name     string
		location string
		override map[string]string
		limits   Limits
		dir      string // "" means the test's directory
		want     string
	}{
		{"missing file", "absent.bin", nil, DefaultLimits, "", "absent.bin is missing"},
		{"path traversal", "../weights.bin", nil, DefaultLimits, "", `location "../weights.bin" leaves the model's directory`},
		{"deep path traversal", "sub/../../../etc/passwd", nil, DefaultLimits, "", "leaves the model's directory"},
		{"absolute path", "/etc/passwd", nil, DefaultLimits, "", "leaves the model's directory"},
		{"no location", "", map[string]string{"location": "-"}, DefaultLimits, "", `no "location" entry`},
		{"length not matching dims", "weights.bin", map[string]string{"length": "12"}, DefaultLimits, "", "tensor needs 16 bytes, the entry gives 12"},
		{"runs past the end", "weights.bin", map[string]string{"offset": "12"}, DefaultLimits, "", "run past its end"},
		{"offset past the end", "weights.bin", map[string]string{"offset": "1000"}, DefaultLimits, "", "offset 1000 is past its end"},
		{"negative offset", "weights.bin", map[string]string{"offset": "-8"}, DefaultLimits, "", `offset "-8" is not a non-negative integer`},
		{"garbage length", "weights.bin", map[string]string{"length": "lots"}, DefaultLimits, "", `length "lots"`},
		{"over the external limit", "weights.bin", nil, Limits{MaxTotalBytes: 8}, "", "limit of 8 bytes per model"},
		{"directory unknown", "weights.bin", nil, DefaultLimits, "-", "the model's directory is unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data := externalModel(t, dir, tc.location, tc.override)
			decodeDir := dir
			if tc.dir == "-" {
				decodeDir = ""
			}
			_, err := DecodeModel(data, decodeDir, tc.limits)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `initializer "W"`)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestExternalDataSymlinkEscape(t *testing.T) {
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.bin"), make([]byte, 16), 0o644))
	dir := t.TempDir()
	data := externalModel(t, dir, "link.bin", map[string]string{"offset": "0"})
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.bin"), filepath.Join(dir, "link.bin")))
	_, err := DecodeModel(data, dir, DefaultLimits)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "link.bin")
	assert.Contains(t, err.Error(), "path escapes from parent")
}

func TestExternalDataInSubdirectory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "data"), 0o755))
	data := externalModel(t, dir, "data/weights.bin", nil)
	require.NoError(t, os.Rename(filepath.Join(dir, "weights.bin"), filepath.Join(dir, "data", "weights.bin")))
	m, err := DecodeModel(data, dir, DefaultLimits)
	require.NoError(t, err)
	assert.Len(t, m.Graph.Initializer[0].RawData, 16)
}
