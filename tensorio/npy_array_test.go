package tensorio

import (
	"bytes"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
)

// npyArrayGoldens are the .npy files of testdata/gen.py that only Arrays
// hold exactly: float16, the integer types *tensor.Dense readers did not
// offer, and zero elements. The values are NumPy's (pattern in gen.py).
var npyArrayGoldens = []struct {
	file       string
	want       *array.Array
	numpyBytes bool // WriteNPYArray of want reproduces the file
}{
	{"f2_2x3.npy", &array.Array{DType: array.Float16, Shape: []int{2, 3}, Data: []float32{-1.5, -1.25, -1, -0.75, -0.5, -0.25}}, true},
	{"f2_big_endian.npy", &array.Array{DType: array.Float16, Shape: []int{3}, Data: []float32{-1.5, -1.25, -1}}, false},
	{"i2_4.npy", &array.Array{DType: array.Int16, Shape: []int{4}, Data: []int16{-7, -4, -1, 2}}, true},
	{"u2_4.npy", &array.Array{DType: array.Uint16, Shape: []int{4}, Data: []uint16{65529, 65532, 65535, 2}}, true},
	{"u4_4.npy", &array.Array{DType: array.Uint32, Shape: []int{4}, Data: []uint32{4294967289, 4294967292, 4294967295, 2}}, true},
	{"u8_3.npy", &array.Array{DType: array.Uint64, Shape: []int{3}, Data: []uint64{18446744073709551609, 18446744073709551612, 18446744073709551615}}, true},
	{"i8_0.npy", &array.Array{DType: array.Int64, Shape: []int{0}, Data: []int64{}}, true},
	{"f2_2x0x3.npy", &array.Array{DType: array.Float16, Shape: []int{2, 0, 3}, Data: []float32{}}, true},
	{"bad_empty.npy", &array.Array{DType: array.Float32, Shape: []int{0, 3}, Data: []float32{}}, true},
	{"f4_2x3.npy", arrayOfDense(pattern(tensor.Float32, 2, 3)), true},
}

// arrayOfDense converts a golden Dense.
func arrayOfDense(d *tensor.Dense) *array.Array {
	a, err := array.FromDense(d)
	if err != nil {
		panic(err)
	}
	return a
}

func TestReadNPYArrayGoldens(t *testing.T) {
	for _, g := range npyArrayGoldens {
		t.Run(g.file, func(t *testing.T) {
			got, err := ReadNPYArrayFile(filepath.Join("testdata", "npy", g.file))
			require.NoError(t, err)
			assert.Equal(t, g.want, got)
			if g.numpyBytes {
				var buf bytes.Buffer
				require.NoError(t, WriteNPYArray(&buf, g.want))
				assert.Equal(t, readTestdata(t, "npy", g.file), buf.Bytes(), "np.save's bytes")
			}
		})
	}
}

func TestReadNPYFloat16(t *testing.T) {
	a, err := ReadNPYArrayFile(filepath.Join("testdata", "npy", "f2_specials.npy"))
	require.NoError(t, err)
	got := a.Data.([]float32)
	assert.True(t, math.IsNaN(float64(got[0])))
	assert.Equal(t, []float32{float32(math.Inf(1)), float32(math.Inf(-1)), 0x1p-24, 65504}, got[1:5])
	assert.True(t, math.Signbit(float64(got[5])), "negative zero")
	var buf bytes.Buffer
	require.NoError(t, WriteNPYArray(&buf, a))
	assert.Equal(t, readTestdata(t, "npy", "f2_specials.npy"), buf.Bytes(), "NaN's bits included")

	// The Dense reader widens float16 to float32.
	d, err := ReadNPYFile(filepath.Join("testdata", "npy", "f2_2x3.npy"))
	require.NoError(t, err)
	assert.Equal(t, tensor.Float32, d.Dtype())
	assert.Equal(t, []float32{-1.5, -1.25, -1, -0.75, -0.5, -0.25}, d.Data())
}

// Types NumPy lacks are written as a type that holds their values:
// bfloat16 and the float8 types as float32, int4 as int8, uint2 as uint8.
func TestWriteNPYArrayWidensTypesNumPyLacks(t *testing.T) {
	for _, c := range []struct {
		in, want *array.Array
	}{
		{&array.Array{DType: array.BFloat16, Shape: []int{2}, Data: []float32{1.5, -3}},
			&array.Array{DType: array.Float32, Shape: []int{2}, Data: []float32{1.5, -3}}},
		{&array.Array{DType: array.Float8E4M3FN, Shape: []int{1}, Data: []float32{448}},
			&array.Array{DType: array.Float32, Shape: []int{1}, Data: []float32{448}}},
		{&array.Array{DType: array.Int4, Shape: []int{2}, Data: []int8{-8, 7}},
			&array.Array{DType: array.Int8, Shape: []int{2}, Data: []int8{-8, 7}}},
		{&array.Array{DType: array.Uint2, Shape: []int{0}, Data: []uint8{}},
			&array.Array{DType: array.Uint8, Shape: []int{0}, Data: []uint8{}}},
	} {
		var buf bytes.Buffer
		require.NoError(t, WriteNPYArray(&buf, c.in), c.in.String())
		got, err := ReadNPYArray(&buf)
		require.NoError(t, err)
		assert.Equal(t, c.want, got)
	}
	err := WriteNPYArray(&bytes.Buffer{}, &array.Array{DType: array.Float32, Shape: []int{2}, Data: []float32{1}})
	assert.ErrorContains(t, err, "shape (2,) needs 2 elements, the data has 1")
}

func TestNPZArraysRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outputs.npz")
	names := []string{"logits", "present.0.key", "mask"}
	arrays := []*array.Array{
		{DType: array.Float16, Shape: []int{1, 2}, Data: []float32{0.0999755859375, -65504}},
		{DType: array.Float32, Shape: []int{1, 2, 0, 4}, Data: []float32{}},
		{DType: array.Bool, Shape: []int{}, Data: []bool{true}},
	}
	require.NoError(t, WriteNPZArrays(path, names, arrays))
	gotNames, got, err := ReadNPZArrays(path)
	require.NoError(t, err)
	assert.Equal(t, names, gotNames)
	assert.Equal(t, arrays, got)

	_, _, err = ReadNPZ(path)
	assert.ErrorContains(t, err, `member "present.0.key.npy": shape (1, 2, 0, 4) has no elements, which *tensor.Dense cannot hold`)
	assert.ErrorContains(t, WriteNPZArrays(path, []string{"a"}, []*array.Array{nil}), `tensor "a" is nil`)
}
