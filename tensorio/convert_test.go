package tensorio

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

func TestToFloat32(t *testing.T) {
	for _, c := range []struct {
		name string
		in   *tensor.Dense
		want []float32
	}{
		{"float64 rounds to nearest", tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{0.1, -2.5, 1 + 0x1p-30})), []float32{0.1, -2.5, 1}},
		{"int64", pattern(tensor.Int64, 2, 2), []float32{-7, -4, -1, 2}},
		{"int64 beyond 2^24 rounds", tensor.New(tensor.WithShape(1), tensor.WithBacking([]int64{1<<24 + 1})), []float32{1 << 24}},
		{"int32", pattern(tensor.Int32, 2), []float32{-7, -4}},
		{"uint8", pattern(tensor.Uint8, 3), []float32{0, 37, 74}},
		{"int8", pattern(tensor.Int8, 2), []float32{-128, -91}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ToFloat32(c.in)
			require.NoError(t, err)
			assert.Equal(t, tensor.Float32, got.Dtype())
			assert.Equal(t, []int(c.in.Shape()), []int(got.Shape()))
			assert.Equal(t, c.want, got.Data())
		})
	}
}

func TestToFloat32KeepsFloat32AndScalars(t *testing.T) {
	x := pattern(tensor.Float32, 2, 3)
	got, err := ToFloat32(x)
	require.NoError(t, err)
	assert.Same(t, x, got)

	scalar, err := ToFloat32(pattern(tensor.Float64))
	require.NoError(t, err)
	assert.True(t, scalar.IsScalar())
	assert.Equal(t, float32(-1.5), scalar.Data())
}

func TestToFloat32RefusesBool(t *testing.T) {
	_, err := ToFloat32(pattern(tensor.Bool, 2))
	require.Error(t, err)
	assert.Equal(t, "cannot convert a bool tensor to float32 (want float32, float64 or an integer type)", err.Error())
	_, err = ToFloat32(nil)
	require.Error(t, err)
}
