package onnxio

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func TestWriteReadModelRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "small.onnx")
	m := smallModel(t)
	require.NoError(t, WriteModel(path, m))

	got, err := ReadModel(path)
	require.NoError(t, err)
	assert.True(t, proto.Equal(m, got), "decoded model differs from the one written")

	// Byte stability: encode(decode(file)) is the file.
	first, err := os.ReadFile(path)
	require.NoError(t, err)
	again, err := EncodeModel(got)
	require.NoError(t, err)
	assert.Equal(t, first, again)

	// Written twice, the same bytes; and no temporary file is left over.
	require.NoError(t, WriteModel(path, got))
	second, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, first, second)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1)

	assert.EqualValues(t, 13, OpsetVersion(got, ""))
	assert.EqualValues(t, 13, OpsetVersion(got, "ai.onnx"))
	assert.EqualValues(t, 0, OpsetVersion(got, "com.microsoft"))
	config, ok := Metadata(got, "attnrun.config")
	assert.True(t, ok)
	assert.Equal(t, "layers: []\n", config)
}

func TestUnknownFieldsSurviveRoundTrip(t *testing.T) {
	// A ModelProto with fields the subset does not declare (functions = 25,
	// a field from the future = 99) and a node field (overload = 8).
	m := smallModel(t)
	node := m.Graph.Node[0]
	node.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 8, protowire.BytesType), "v2"))
	data := mustEncode(t, m)
	data = protowire.AppendBytes(protowire.AppendTag(data, 25, protowire.BytesType), []byte{0x0a, 0x01, 'f'})
	data = protowire.AppendVarint(protowire.AppendTag(data, 99, protowire.VarintType), 7)

	got, err := DecodeModel(data, "", DefaultLimits)
	require.NoError(t, err)
	assert.Equal(t, "matmul", got.Graph.Node[0].GetName())
	again := mustEncode(t, got)
	assert.Equal(t, data, again, "unknown fields must be written back unchanged")
}

func TestSetMetadataReplaces(t *testing.T) {
	m := smallModel(t)
	SetMetadata(m, "attnrun.config", "x: 1\n")
	SetMetadata(m, "other", "y")
	v, _ := Metadata(m, "attnrun.config")
	assert.Equal(t, "x: 1\n", v)
	assert.Len(t, m.MetadataProps, 2)
	_, ok := Metadata(m, "missing")
	assert.False(t, ok)
}

func TestWriteModelLeavesNothingOnError(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-dir", "m.onnx")
	err := WriteModel(missing, smallModel(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), missing)

	// The target is a directory: the rename fails after the temp file was
	// written; the temp file must be gone.
	target := filepath.Join(dir, "taken.onnx")
	require.NoError(t, os.Mkdir(target, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(target, "keep"), nil, 0o644))
	err = WriteModel(target, smallModel(t))
	require.Error(t, err)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.Contains(e.Name(), ".tmp-"), "temporary file %s left behind", e.Name())
	}
}

// TestDecodeBadInput is the table of hostile and mistaken inputs: each is
// refused with an error that says what is wrong, and none panics.
func TestDecodeBadInput(t *testing.T) {
	valid := mustEncode(t, smallModel(t))
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}

	tests := []struct {
		name    string
		data    []byte
		limits  Limits
		wantIs  error
		wantMsg []string
	}{
		{"empty", nil, DefaultLimits, ErrNotONNX, []string{"empty"}},
		{"truncated", valid[:len(valid)-7], DefaultLimits, ErrNotONNX, []string{"ModelProto", "truncated or corrupt"}},
		{"random bytes", random, DefaultLimits, ErrNotONNX, []string{"ModelProto"}},
		{"zip (a .pt checkpoint)", append([]byte("PK\x03\x04\x14\x00\x00\x00"), random[:100]...), DefaultLimits, ErrNotONNX, []string{"zip archive", "not an ONNX ModelProto"}},
		{"npy", append([]byte("\x93NUMPY\x01\x00v\x00{'descr': '<f4', "), random[:50]...), DefaultLimits, ErrNotONNX, []string{"NumPy .npy", "not an ONNX ModelProto"}},
		{"pickle", []byte("\x80\x02}q\x00X\x05\x00\x00\x00stateq\x01"), DefaultLimits, ErrNotONNX, []string{"pickle"}},
		{"json", []byte(`{"ir_version": 8}`), DefaultLimits, ErrNotONNX, []string{"JSON"}},
		{"a tensor file given as a model", mustEncodeTensor(t, floatTensor(t, "x", []int{2}, []float32{1, 2})), DefaultLimits, ErrNotONNX, []string{"serialized TensorProto (a test-data file?)"}},
		{"file over the limit", valid, Limits{MaxFileBytes: 10}, ErrLimit, []string{"over the limit of 10"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeModel(tc.data, "", tc.limits)
			require.Error(t, err)
			assert.Nil(t, m)
			assert.ErrorIs(t, err, tc.wantIs)
			for _, want := range tc.wantMsg {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

// TestDecodeBadTensors corrupts one initializer of a valid model at a time.
func TestDecodeBadTensors(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(w *onnxpb.TensorProto)
		limits  Limits
		wantIs  error
		wantMsg string
	}{
		{"negative dim", func(w *onnxpb.TensorProto) { w.Dims = []int64{3, -4} }, DefaultLimits, nil,
			"dims[1] is -4: dimensions must not be negative"},
		{"absurd dims refused before allocating", func(w *onnxpb.TensorProto) { w.Dims = []int64{1 << 20, 1 << 20} }, DefaultLimits, ErrLimit,
			"over the limit"},
		{"element count overflows int64", func(w *onnxpb.TensorProto) { w.Dims = []int64{1 << 62, 1 << 62, 4} }, DefaultLimits, ErrLimit,
			"overflows int64"},
		{"rank over the limit", func(w *onnxpb.TensorProto) { w.Dims = make([]int64, 40) }, DefaultLimits, ErrLimit,
			"rank 40 exceeds the limit of 32"},
		{"tensor over a small limit", func(w *onnxpb.TensorProto) {}, Limits{MaxTensorBytes: 16}, ErrLimit,
			"48 bytes, over the limit of 16"},
		{"raw_data length does not match dims", func(w *onnxpb.TensorProto) { w.RawData = w.RawData[:44] }, DefaultLimits, nil,
			"raw_data has 44 bytes, want 48 for 12 elements"},
		{"typed field count does not match dims", func(w *onnxpb.TensorProto) { w.RawData = nil; w.FloatData = make([]float32, 11) }, DefaultLimits, nil,
			"float_data has 11 values, want 12"},
		{"two data fields", func(w *onnxpb.TensorProto) { w.FloatData = make([]float32, 12) }, DefaultLimits, nil,
			"both float_data and raw_data"},
		{"wrong typed field", func(w *onnxpb.TensorProto) { w.RawData = nil; w.Int64Data = make([]int64, 12) }, DefaultLimits, nil,
			"holds data in int64_data, but data type FLOAT uses float_data"},
		{"no data", func(w *onnxpb.TensorProto) { w.RawData = nil }, DefaultLimits, nil,
			"has 12 elements but no data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := smallModel(t)
			tc.corrupt(m.Graph.Initializer[0])
			data := mustEncode(t, m)
			_, err := DecodeModel(data, "", tc.limits)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `initializer "W"`)
			assert.Contains(t, err.Error(), tc.wantMsg)
			if tc.wantIs != nil {
				assert.ErrorIs(t, err, tc.wantIs)
			}
		})
	}
}

func TestDecodeChecksNodeAndSubgraphTensors(t *testing.T) {
	bad := floatTensor(t, "value", []int{2}, []float32{1, 2})
	bad.RawData = bad.RawData[:5]
	m := smallModel(t)
	m.Graph.Node = append(m.Graph.Node, &onnxpb.NodeProto{
		Name: proto.String("branch"), OpType: proto.String("If"), Input: []string{"cond"}, Output: []string{"z"},
		Attribute: []*onnxpb.AttributeProto{{
			Name: proto.String("then_branch"), Type: onnxpb.AttributeProto_GRAPH.Enum(),
			G: &onnxpb.GraphProto{Node: []*onnxpb.NodeProto{{
				OpType: proto.String("Constant"), Output: []string{"z"},
				Attribute: []*onnxpb.AttributeProto{{Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: bad}},
			}}},
		}},
	})
	_, err := DecodeModel(mustEncode(t, m), "", DefaultLimits)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `node "branch" (If) attribute "then_branch": node #0 (Constant) attribute "value"`)
	assert.Contains(t, err.Error(), "raw_data has 5 bytes, want 8")
}

func TestReadModelErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "weights.onnx")
	require.NoError(t, os.WriteFile(path, []byte("PK\x03\x04rest of a zip"), 0o644))
	_, err := ReadModel(path)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), path+": "), err.Error())
	assert.Contains(t, err.Error(), "not an ONNX ModelProto")

	_, err = ReadModel(filepath.Join(dir, "absent.onnx"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	_, err = ReadModel(dir)
	assert.ErrorContains(t, err, "is a directory")

	big := filepath.Join(dir, "big.onnx")
	require.NoError(t, os.WriteFile(big, bytes.Repeat([]byte{0}, 100), 0o644))
	_, err = Limits{MaxFileBytes: 64}.ReadModel(big)
	assert.True(t, errors.Is(err, ErrLimit), "%v", err)
}

func mustEncodeTensor(t testing.TB, tp *onnxpb.TensorProto) []byte {
	t.Helper()
	data, err := EncodeTensor(tp)
	require.NoError(t, err)
	return data
}
