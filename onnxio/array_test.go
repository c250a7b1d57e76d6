package onnxio

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

func readReference(t *testing.T, name string) *onnxpb.TensorProto {
	t.Helper()
	tp, err := ReadTensorFile(filepath.Join("testdata", "tensors", name))
	require.NoError(t, err)
	return tp
}

// Every reference file of gen.py converts to an Array of its own data
// type, and back to the same raw_data the onnx package writes.
func TestTensorToArrayReferenceFiles(t *testing.T) {
	for _, ref := range referenceTensors {
		for _, encoding := range []string{"raw", "typed"} {
			tp := readReference(t, ref.stem+"_"+encoding+".pb")
			a, err := TensorToArray(tp)
			require.NoError(t, err, ref.stem)
			assert.Equal(t, array.DType(tp.GetDataType()), a.DType, ref.stem)
			assert.Equal(t, []int{2, 3}, a.Shape)
			assertBitsEqual(t, ref.want, a.Data)

			back, err := ArrayToTensor(ref.stem, a)
			require.NoError(t, err)
			assert.Equal(t, readReference(t, ref.stem+"_raw.pb").RawData, back.RawData, "%s from %s", ref.stem, encoding)
		}
	}
}

// Zero-element tensors, which *tensor.Dense cannot hold, convert both ways.
func TestTensorToArrayEmpty(t *testing.T) {
	for _, c := range []struct {
		file  string
		dtype array.DType
		shape []int
		data  any
	}{
		{"empty_float32_raw.pb", array.Float32, []int{2, 0, 3}, []float32{}},
		{"empty_int64_typed.pb", array.Int64, []int{0}, []int64{}},
		{"empty_float16_raw.pb", array.Float16, []int{0}, []float32{}},
	} {
		tp := readReference(t, c.file)
		a, err := TensorToArray(tp)
		require.NoError(t, err, c.file)
		assert.Equal(t, &array.Array{DType: c.dtype, Shape: c.shape, Data: c.data}, a, c.file)

		back, err := ArrayToTensor(tp.GetName(), a)
		require.NoError(t, err)
		assert.Equal(t, tp.Dims, back.Dims)
		assert.Empty(t, back.RawData)
		again, err := TensorToArray(back)
		require.NoError(t, err)
		assert.Equal(t, a, again)

		_, err = TensorToDense(tp)
		assert.ErrorContains(t, err, "no elements, which *tensor.Dense cannot represent (use TensorToArray)")
	}
}

func TestFloat16Specials(t *testing.T) {
	tp := readReference(t, "float16_specials_raw.pb")
	a, err := TensorToArray(tp)
	require.NoError(t, err)
	got := a.Data.([]float32)
	assert.True(t, math.IsNaN(float64(got[0])))
	assert.Equal(t, []float32{float32(math.Inf(1)), float32(math.Inf(-1)), 0x1p-24, -0x1p-14, 0.0999755859375}, got[1:])
	back, err := ArrayToTensor("specials", a)
	require.NoError(t, err)
	assert.Equal(t, tp.RawData, back.RawData, "NumPy's bytes, NaN included")
}

// The sub-byte and float8 types decode to the values ONNX's reference
// widens them to, and encode back to the bytes onnx 1.23 wrote.
func TestTensorToArrayNarrowTypes(t *testing.T) {
	for _, name := range []string{"int4", "uint4", "int2", "uint2", "float4e2m1",
		"float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float8e8m0"} {
		t.Run(name, func(t *testing.T) {
			tp := readReference(t, filepath.Join("onnx-node-tests", name+".pb"))
			a, err := TensorToArray(tp)
			require.NoError(t, err)
			assert.Equal(t, name, a.DType.String())
			want, err := TensorToArray(readReference(t, filepath.Join("onnx-node-tests", name+"_as_float32.pb")))
			require.NoError(t, err)
			require.Equal(t, want.Shape, a.Shape)
			for i, w := range want.Data.([]float32) {
				var g float64
				switch d := a.Data.(type) {
				case []float32:
					g = float64(d[i])
				case []int8:
					g = float64(d[i])
				case []uint8:
					g = float64(d[i])
				}
				if math.IsNaN(float64(w)) {
					assert.True(t, math.IsNaN(g), "element %d: %v, want NaN", i, g)
					continue
				}
				assert.Equal(t, float64(w), g, "element %d", i)
			}
			back, err := ArrayToTensor(tp.GetName(), a)
			require.NoError(t, err)
			assert.Equal(t, tp.RawData, back.RawData)
		})
	}
}

func TestTensorToArrayTypedSubByte(t *testing.T) {
	// int32_data holds one byte of packed elements per value.
	tp := &onnxpb.TensorProto{Name: proto.String("q"), DataType: proto.Int32(int32(onnxpb.TensorProto_INT4)),
		Dims: []int64{3}, Int32Data: []int32{0x8f, 0x07}}
	a, err := TensorToArray(tp)
	require.NoError(t, err)
	assert.Equal(t, []int8{-1, -8, 7}, a.Data)
}

func TestTensorToArrayRefuses(t *testing.T) {
	_, err := TensorToArray(&onnxpb.TensorProto{Name: proto.String("s"), DataType: proto.Int32(int32(onnxpb.TensorProto_STRING)),
		Dims: []int64{1}, StringData: [][]byte{[]byte("a")}})
	assert.ErrorContains(t, err, `tensor "s" (STRING [1]): data type STRING is not supported for conversion`)
	_, err = Limits{MaxMemory: 7}.TensorToArray(&onnxpb.TensorProto{Name: proto.String("h"), DataType: proto.Int32(int32(Float16)),
		Dims: []int64{2}, RawData: []byte{0, 0x3c, 0, 0x3c}})
	assert.ErrorContains(t, err, "over the memory budget", "float16 is held as float32: 8 bytes")
	_, err = ArrayToTensor("bad", &array.Array{DType: array.Float32, Shape: []int{2}, Data: []float32{1}})
	assert.ErrorContains(t, err, `tensor "bad": array: shape (2,) needs 2 elements, the data has 1`)
}
