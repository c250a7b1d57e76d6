package onnxio

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"
)

// referenceTensors are the values testdata/gen.py writes with the onnx
// Python package, shape (2, 3), each dtype once in raw_data (*_raw.pb) and
// once in its typed field (*_typed.pb).
var referenceTensors = []struct {
	stem string
	want any // the Dense backing TensorToDense must produce
}{
	{"float32", []float32{1.0, -2.5, 0.333251953125, 65504.0, 5.960464477539063e-08, float32(math.Copysign(0, -1))}},
	{"float64", []float64{1.0, -2.5, 0.333251953125, 65504.0, 5.960464477539063e-08, math.Copysign(0, -1)}},
	// 0.333251953125 is the half nearest 1/3, 65504 the largest half,
	// 2^-24 the smallest subnormal half.
	{"float16", []float32{1.0, -2.5, 0.333251953125, 65504.0, 5.960464477539063e-08, float32(math.Copysign(0, -1))}},
	{"bfloat16", []float32{1.0, -2.5, 3.140625, 65280.0, float32(math.Copysign(0, -1)), 0.5}},
	{"int64", []int64{0, 1, -1, 1 << 40, -(1 << 40), math.MaxInt64}},
	{"int32", []int32{0, 1, -1, 127, -128, 42}},
	{"int16", []int16{0, 1, -1, 127, -128, 42}},
	{"int8", []int8{0, 1, -1, 127, -128, 42}},
	{"uint64", []uint64{0, 1, 2, 127, 128, 255}},
	{"uint32", []uint32{0, 1, 2, 127, 128, 255}},
	{"uint16", []uint16{0, 1, 2, 127, 128, 255}},
	{"uint8", []uint8{0, 1, 2, 127, 128, 255}},
	{"bool", []bool{true, false, true, true, false, false}},
}

func TestTensorToDenseReferenceFiles(t *testing.T) {
	for _, ref := range referenceTensors {
		for _, encoding := range []string{"raw", "typed"} {
			t.Run(ref.stem+"_"+encoding, func(t *testing.T) {
				tp, err := ReadTensorFile(filepath.Join("testdata", "tensors", ref.stem+"_"+encoding+".pb"))
				require.NoError(t, err)
				if encoding == "raw" {
					require.NotNil(t, tp.RawData, "the reference file should use raw_data")
				} else {
					require.Nil(t, tp.RawData, "the reference file should use a typed field")
				}
				d, err := TensorToDense(tp)
				require.NoError(t, err)
				assert.Equal(t, tensor.Shape{2, 3}, d.Shape())
				assertBitsEqual(t, ref.want, d.Data())
			})
		}
	}
}

// assertBitsEqual compares backings exactly, floats by bit pattern so that
// -0 and +0 differ.
func assertBitsEqual(t *testing.T, want, got any) {
	t.Helper()
	switch w := want.(type) {
	case []float32:
		g, ok := got.([]float32)
		require.True(t, ok, "got %T, want []float32", got)
		require.Len(t, g, len(w))
		for i := range w {
			assert.Equal(t, math.Float32bits(w[i]), math.Float32bits(g[i]), "element %d: got %v, want %v", i, g[i], w[i])
		}
	case []float64:
		g, ok := got.([]float64)
		require.True(t, ok, "got %T, want []float64", got)
		require.Len(t, g, len(w))
		for i := range w {
			assert.Equal(t, math.Float64bits(w[i]), math.Float64bits(g[i]), "element %d: got %v, want %v", i, g[i], w[i])
		}
	default:
		assert.Equal(t, want, got)
	}
}

func TestScalarTensor(t *testing.T) {
	tp, err := ReadTensorFile(filepath.Join("testdata", "tensors", "scalar_float32.pb"))
	require.NoError(t, err)
	d, err := TensorToDense(tp)
	require.NoError(t, err)
	assert.True(t, d.IsScalar())
	assert.Equal(t, float32(7.5), d.Data())

	back, err := DenseToTensor("scalar", d)
	require.NoError(t, err)
	assert.Empty(t, back.Dims)
	assert.True(t, proto.Equal(tp, back), "scalar round trip: got %v, want %v", back, tp)
}

// TestDenseToTensorRoundTrip writes every supported dtype to raw_data and
// reads it back; for float32 the bytes are compared with the reference file
// the onnx Python package wrote.
func TestDenseToTensorRoundTrip(t *testing.T) {
	for _, ref := range referenceTensors {
		if ref.stem == "float16" || ref.stem == "bfloat16" {
			continue // decoded to float32; DenseToTensor writes FLOAT
		}
		t.Run(ref.stem, func(t *testing.T) {
			d := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(ref.want))
			tp, err := DenseToTensor(ref.stem, d)
			require.NoError(t, err)
			assert.Equal(t, []int64{2, 3}, tp.Dims)

			// Same bytes as the onnx package's numpy_helper.from_array.
			pyRaw, err := ReadTensorFile(filepath.Join("testdata", "tensors", ref.stem+"_raw.pb"))
			require.NoError(t, err)
			assert.Equal(t, pyRaw.GetDataType(), tp.GetDataType())
			assert.Equal(t, pyRaw.RawData, tp.RawData)

			back, err := TensorToDense(tp)
			require.NoError(t, err)
			assertBitsEqual(t, ref.want, back.Data())
		})
	}
}

func TestDenseToTensorMaterializesViews(t *testing.T) {
	d := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6}))
	v, err := d.Slice(nil, tensor.S(1, 3))
	require.NoError(t, err)
	tp, err := DenseToTensor("view", v.(*tensor.Dense))
	require.NoError(t, err)
	back, err := TensorToDense(tp)
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{2, 2}, back.Shape())
	assert.Equal(t, []float32{2, 3, 5, 6}, back.Data())
}

func TestDenseToTensorRefusesUnsupported(t *testing.T) {
	d := tensor.New(tensor.WithShape(2), tensor.WithBacking([]complex64{1, 2}))
	_, err := DenseToTensor("c64", d)
	assert.ErrorContains(t, err, `tensor "c64": array: dtype complex64 is not supported`)
	_, err = DenseToTensor("nil", nil)
	assert.ErrorContains(t, err, "nil")
}

func TestTensorToDenseDoesNotAlias(t *testing.T) {
	tp := &onnxpb.TensorProto{Name: proto.String("f"), DataType: proto.Int32(int32(Float)), Dims: []int64{2}, FloatData: []float32{1, 2}}
	d, err := TensorToDense(tp)
	require.NoError(t, err)
	d.Data().([]float32)[0] = 99
	assert.Equal(t, float32(1), tp.FloatData[0])
}

func TestHalfConversions(t *testing.T) {
	tests := []struct {
		bits uint16
		want float32
	}{
		{0x3c00, 1},
		{0xc000, -2},
		{0x7bff, 65504},
		{0x0400, 6.103515625e-05},        // smallest normal
		{0x03ff, 6.097555160522461e-05},  // largest subnormal
		{0x0001, 5.960464477539063e-08},  // smallest subnormal
		{0x8001, -5.960464477539063e-08}, // negative subnormal
		{0x7c00, float32(math.Inf(1))},
		{0xfc00, float32(math.Inf(-1))},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, array.Float16FromBits(tc.bits), "half %#04x", tc.bits)
	}
	assert.True(t, math.IsNaN(float64(array.Float16FromBits(0x7e00))))
	assert.Equal(t, float32(1), array.BFloat16FromBits(0x3f80))
	assert.Equal(t, float32(-2), array.BFloat16FromBits(0xc000))
}

func TestTensorToDenseRefuses(t *testing.T) {
	tests := []struct {
		name string
		tp   *onnxpb.TensorProto
		want string
	}{
		{"absurd dims without allocating",
			&onnxpb.TensorProto{Name: proto.String("huge"), DataType: proto.Int32(int32(Float)), Dims: []int64{1 << 30, 1 << 30}},
			"limit exceeded"},
		{"negative dim",
			&onnxpb.TensorProto{Name: proto.String("neg"), DataType: proto.Int32(int32(Float)), Dims: []int64{-1}},
			"must not be negative"},
		{"zero elements",
			&onnxpb.TensorProto{Name: proto.String("empty"), DataType: proto.Int32(int32(Float)), Dims: []int64{0, 3}},
			"no elements"},
		{"unsupported type",
			&onnxpb.TensorProto{Name: proto.String("s"), DataType: proto.Int32(int32(onnxpb.TensorProto_STRING)), Dims: []int64{1}, StringData: [][]byte{[]byte("a")}},
			"data type STRING is not supported"},
		{"external data not loaded",
			&onnxpb.TensorProto{Name: proto.String("ext"), DataType: proto.Int32(int32(Float)), Dims: []int64{1},
				DataLocation: onnxpb.TensorProto_EXTERNAL.Enum()},
			"external file"},
		{"raw length mismatch",
			&onnxpb.TensorProto{Name: proto.String("short"), DataType: proto.Int32(int32(Int64)), Dims: []int64{2}, RawData: make([]byte, 15)},
			"raw_data has 15 bytes, want 16"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := TensorToDense(tc.tp)
			require.Error(t, err)
			assert.Nil(t, d)
			assert.Contains(t, err.Error(), `tensor "`+tc.tp.GetName()+`"`)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCheckDims(t *testing.T) {
	lim := Limits{MaxTensorBytes: 1 << 20, MaxDims: 4}
	tests := []struct {
		dims    []int64
		bits    int
		want    int64
		wantErr string
	}{
		{nil, 32, 1, ""},
		{[]int64{2, 3, 4}, 32, 24, ""},
		{[]int64{0, 1 << 62}, 32, 0, ""},
		{[]int64{1 << 18}, 32, 1 << 18, ""},
		{[]int64{1<<18 + 1}, 32, 0, "over the limit of 1048576 bytes"},
		{[]int64{7}, 4, 7, ""},
		{[]int64{1, 1, 1, 1, 1}, 8, 0, "rank 5 exceeds the limit of 4"},
		{[]int64{math.MaxInt64, 2}, 8, 0, "overflows int64"},
		{[]int64{math.MaxInt64 / 2}, 64, 0, "overflow the byte count"},
		{[]int64{2, -1}, 8, 0, "dims[1] is -1"},
	}
	for _, tc := range tests {
		got, err := lim.CheckDims(tc.dims, tc.bits)
		if tc.wantErr != "" {
			assert.ErrorContains(t, err, tc.wantErr, "dims %v", tc.dims)
			continue
		}
		require.NoError(t, err, "dims %v", tc.dims)
		assert.Equal(t, tc.want, got, "dims %v", tc.dims)
	}
	assert.Equal(t, 4, ElemBytes(Float))
	assert.Equal(t, 1, ElemBytes(Bool))
	assert.Equal(t, 0, ElemBytes(onnxpb.TensorProto_STRING))
	assert.Equal(t, 0, ElemBytes(onnxpb.TensorProto_INT4))
}
