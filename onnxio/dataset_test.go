package onnxio

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

func sampleDataSet(t *testing.T) *DataSet {
	return &DataSet{
		Inputs: []*onnxpb.TensorProto{
			floatTensor(t, "x", []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
			floatTensor(t, "mask", []int{1}, []float32{0}),
		},
		Outputs: []*onnxpb.TensorProto{floatTensor(t, "y", []int{2}, []float32{0.25, 0.75})},
	}
}

func TestDataSetRoundTrip(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "test_data_set_0")
	ds := sampleDataSet(t)
	require.NoError(t, WriteDataSet(dir, ds))

	got, err := ReadDataSet(dir)
	require.NoError(t, err)
	assert.Equal(t, dir, got.Dir)
	require.Len(t, got.Inputs, 2)
	require.Len(t, got.Outputs, 1)
	for i := range ds.Inputs {
		assert.True(t, proto.Equal(ds.Inputs[i], got.Inputs[i]), "input %d", i)
	}
	assert.True(t, proto.Equal(ds.Outputs[0], got.Outputs[0]))

	// Files are the deterministic encoding.
	raw, err := os.ReadFile(filepath.Join(dir, "input_0.pb"))
	require.NoError(t, err)
	assert.Equal(t, mustEncodeTensor(t, ds.Inputs[0]), raw)

	// Writing a smaller set removes the stale input_1.pb.
	ds.Inputs = ds.Inputs[:1]
	require.NoError(t, WriteDataSet(dir, ds))
	_, err = os.Stat(filepath.Join(dir, "input_1.pb"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	got, err = ReadDataSet(dir)
	require.NoError(t, err)
	assert.Len(t, got.Inputs, 1)
}

func TestDataSetDirs(t *testing.T) {
	root := t.TempDir()
	for _, n := range []string{"test_data_set_10", "test_data_set_2", "test_data_set_0", "test_data_set_x", "other"} {
		require.NoError(t, os.Mkdir(filepath.Join(root, n), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "model.onnx"), nil, 0o644))
	dirs, err := DataSetDirs(root)
	require.NoError(t, err)
	assert.Equal(t, []string{
		filepath.Join(root, "test_data_set_0"),
		filepath.Join(root, "test_data_set_2"),
		filepath.Join(root, "test_data_set_10"),
	}, dirs)

	// A set directory itself.
	set := filepath.Join(root, "test_data_set_0")
	require.NoError(t, WriteDataSet(set, sampleDataSet(t)))
	dirs, err = DataSetDirs(set)
	require.NoError(t, err)
	assert.Equal(t, []string{set}, dirs)

	_, err = DataSetDirs(filepath.Join(root, "other"))
	assert.ErrorContains(t, err, "no test_data_set_N")
}

func TestReadDataSetBadInput(t *testing.T) {
	t.Run("gap in numbering", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, WriteTensorFile(filepath.Join(dir, "input_0.pb"), floatTensor(t, "a", []int{1}, []float32{1})))
		require.NoError(t, WriteTensorFile(filepath.Join(dir, "input_2.pb"), floatTensor(t, "c", []int{1}, []float32{1})))
		_, err := ReadDataSet(dir)
		assert.ErrorContains(t, err, "input_1.pb is missing")
	})
	t.Run("not a set", func(t *testing.T) {
		_, err := ReadDataSet(t.TempDir())
		assert.ErrorContains(t, err, "not a test-data set")
	})
	t.Run("corrupt tensor file", func(t *testing.T) {
		dir := t.TempDir()
		data := mustEncodeTensor(t, floatTensor(t, "a", []int{4}, []float32{1, 2, 3, 4}))
		path := filepath.Join(dir, "output_0.pb")
		require.NoError(t, os.WriteFile(path, data[:len(data)-3], 0o644))
		_, err := ReadDataSet(dir)
		require.Error(t, err)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "TensorProto")
	})
	t.Run("npy given as a tensor file", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "input_0.pb")
		require.NoError(t, os.WriteFile(path, []byte("\x93NUMPY\x01\x00v\x00{'descr': '<f4'}"), 0o644))
		_, err := ReadTensorFile(path)
		assert.ErrorIs(t, err, ErrNotONNX)
		assert.ErrorContains(t, err, "NumPy .npy array, not an ONNX TensorProto")
	})
	t.Run("raw_data length mismatch", func(t *testing.T) {
		tp := floatTensor(t, "a", []int{4}, []float32{1, 2, 3, 4})
		tp.Dims = []int64{5}
		_, err := DecodeTensor(mustEncodeTensor(t, tp), DefaultLimits)
		assert.ErrorContains(t, err, `tensor "a" (FLOAT [5]): raw_data has 16 bytes, want 20`)
	})
}

// A set of a GPT-2 style decoder's first step: an empty past, a float16
// input, int64 ids, a bool mask; written from Arrays and read back.
func TestDataSetArraysRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "test_data_set_0")
	inputs := []*array.Array{
		{DType: array.Int64, Shape: []int{1, 3}, Data: []int64{15496, 11, 995}},
		{DType: array.Float16, Shape: []int{1, 2, 0, 4}, Data: []float32{}},
		{DType: array.Bool, Shape: []int{1, 3}, Data: []bool{true, true, false}},
	}
	outputs := []*array.Array{
		{DType: array.Float16, Shape: []int{2}, Data: []float32{0.0999755859375, -65504}},
		{DType: array.Uint4, Shape: []int{3}, Data: []uint8{1, 15, 7}},
	}
	ins, err := ArraysToTensors([]string{"input_ids", "past_key", "mask"}, inputs)
	require.NoError(t, err)
	outs, err := ArraysToTensors([]string{"logits", "codes"}, outputs)
	require.NoError(t, err)
	require.NoError(t, WriteDataSet(dir, &DataSet{Inputs: ins, Outputs: outs}))

	gotIn, gotOut, err := ReadDataSetArrays(dir)
	require.NoError(t, err)
	assert.Equal(t, inputs, gotIn)
	assert.Equal(t, outputs, gotOut)

	_, err = ArraysToTensors([]string{"a"}, nil)
	assert.ErrorContains(t, err, "1 names for 0 arrays")
}

func TestReadDataSetArraysNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	s := &onnxpb.TensorProto{Name: proto.String("s"), DataType: proto.Int32(int32(onnxpb.TensorProto_STRING)), Dims: []int64{1}, StringData: [][]byte{[]byte("x")}}
	require.NoError(t, WriteDataSet(dir, &DataSet{Inputs: []*onnxpb.TensorProto{s}}))
	_, _, err := ReadDataSetArrays(dir)
	assert.ErrorContains(t, err, filepath.Join(dir, "input_0.pb")+`: tensor "s" (STRING [1]): data type STRING is not supported`)
}
