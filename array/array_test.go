package array

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

func TestNewHoldsZeroElements(t *testing.T) {
	a, err := New(Float16, 2, 0, 4)
	require.NoError(t, err)
	assert.Equal(t, 0, a.Len())
	assert.Equal(t, []float32{}, a.Data, "float16 is held as float32")
	require.NoError(t, a.Check())
	assert.Equal(t, "float16 (2, 0, 4)", a.String())

	s, err := New(Int4)
	require.NoError(t, err)
	assert.Equal(t, []int8{0}, s.Data, "a scalar has one element; int4 is held as int8")

	_, err = New(Float32, 2, -1)
	assert.ErrorContains(t, err, "negative dimension")
	_, err = New(String, 1)
	assert.ErrorContains(t, err, "string cannot be held")
	_, err = New(Float32, 1<<40, 1<<40)
	assert.ErrorContains(t, err, "more elements than an int can count")
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		a    *Array
		want string
	}{
		{&Array{DType: Float32, Shape: []int{2}, Data: []float32{1, 2}}, ""},
		{&Array{DType: Float32, Shape: []int{0, 3}, Data: []float32{}}, ""},
		{&Array{DType: BFloat16, Shape: []int{1}, Data: []float32{1}}, ""},
		{&Array{DType: Uint4, Shape: []int{}, Data: []uint8{3}}, ""},
		{&Array{DType: Float32, Shape: []int{3}, Data: []float32{1, 2}}, "shape (3,) needs 3 elements, the data has 2"},
		{&Array{DType: Float16, Shape: []int{1}, Data: []uint16{1}}, "float16 data is []uint16, want []float32"},
		{&Array{DType: Int64, Shape: []int{1}}, "int64 data is <nil>"},
		{&Array{DType: Complex64, Shape: []int{1}, Data: []float32{1, 2}}, "complex64 cannot be held"},
		{nil, "nil *Array"},
	} {
		err := c.a.Check()
		if c.want == "" {
			assert.NoError(t, err)
		} else {
			assert.ErrorContains(t, err, c.want)
		}
	}
}

func TestDenseEdges(t *testing.T) {
	a := FromSlice([]int{2, 3}, []int16{1, 2, 3, 4, 5, 6})
	d, err := a.Dense()
	require.NoError(t, err)
	assert.Equal(t, tensor.Int16, d.Dtype())
	assert.Equal(t, tensor.Shape{2, 3}, d.Shape())
	back, err := FromDense(d)
	require.NoError(t, err)
	assert.Equal(t, a, back)

	scalar, err := FromSlice([]int{}, []bool{true}).Dense()
	require.NoError(t, err)
	assert.True(t, scalar.IsScalar())
	back, err = FromDense(scalar)
	require.NoError(t, err)
	assert.Equal(t, &Array{DType: Bool, Shape: []int{}, Data: []bool{true}}, back)

	_, err = FromSlice([]int{0}, []float32{}).Dense()
	assert.ErrorContains(t, err, "float32 (0,) has zero elements, which *tensor.Dense cannot hold")

	// A transposed view is copied out in logical order.
	m := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
	require.NoError(t, m.T())
	v, err := FromDense(m)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 2}, v.Shape)
	assert.Equal(t, []float64{1, 4, 2, 5, 3, 6}, v.Data)

	_, err = FromDense(nil)
	assert.Error(t, err)
}

func TestDTypeTable(t *testing.T) {
	for _, c := range []struct {
		dt           DType
		name         string
		bits, size   int
		float, narrw bool
	}{
		{Float32, "float32", 32, 4, true, false},
		{Float16, "float16", 16, 4, true, true},
		{BFloat16, "bfloat16", 16, 4, true, true},
		{Float8E5M2FNUZ, "float8e5m2fnuz", 8, 4, true, true},
		{Float4E2M1, "float4e2m1", 4, 4, true, true},
		{Int4, "int4", 4, 1, false, true},
		{Uint2, "uint2", 2, 1, false, true},
		{Uint8, "uint8", 8, 1, false, false},
		{Bool, "bool", 8, 1, false, false},
		{Int64, "int64", 64, 8, false, false},
		{String, "string", 0, 0, false, false},
	} {
		assert.Equal(t, c.name, c.dt.String())
		assert.Equal(t, c.bits, c.dt.Bits(), c.name)
		assert.Equal(t, c.size, c.dt.Size(), c.name)
		assert.Equal(t, c.float, c.dt.IsFloat(), c.name)
		assert.Equal(t, c.narrw, c.dt.IsNarrow(), c.name)
	}
	assert.Equal(t, "dtype(99)", DType(99).String())
	assert.Equal(t, 0x1p-10, Float16.Epsilon())
	assert.Equal(t, float64(Float16FromBits(0x3c01)-1), Float16.Epsilon(), "the gap above 1")
	assert.Equal(t, float64(BFloat16FromBits(0x3f81)-1), BFloat16.Epsilon())
	assert.Equal(t, 0.125, Float8E4M3FN.Epsilon())
	assert.Zero(t, Int8.Epsilon())
	assert.Len(t, StorableTypes(), 23)
}

// No function of the package panics, whatever it is given.
func TestNoPanic(t *testing.T) {
	var nilArray *Array
	assert.NotPanics(t, func() {
		_ = nilArray.Len()
		_ = nilArray.String()
		_ = nilArray.Clone()
		_ = nilArray.Check()
		_, _ = nilArray.Dense()
		_ = (&Array{DType: Float32, Shape: []int{2}}).Clone()
		_, _ = (&Array{DType: Int64, Shape: []int{2}, Data: []float32{1}}).Dense()
		_, _ = FromDense(&tensor.Dense{})
		for _, dt := range []DType{-1, Undefined, Int8, String, Float32, 99} {
			_ = RoundFloat(dt, 1.5, true)
			_ = FloatBits(dt, 1.5)
			_ = FloatFromBits(dt, 3)
			_ = IsValue(dt, 1)
			RoundSlice(dt, []float32{1})
			_ = dt.String() + FormatShape[int](nil)
			_, _ = New(dt, 2)
		}
	})
	assert.Equal(t, float32(1.5), RoundFloat(Int8, 1.5, true), "not a narrow float: float32(x)")
}
