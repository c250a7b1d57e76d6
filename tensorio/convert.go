package tensorio

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
)

// ToFloat32 returns t as a float32 tensor of the same shape, the type model
// inputs must have. A float32 tensor is returned as is (not copied); float64
// values are rounded to nearest and integers converted as PyTorch's
// tensor.float() converts them. Bool tensors are refused: a mask passed where
// numbers are expected is almost always a mistake.
func ToFloat32(t *tensor.Dense) (*tensor.Dense, error) {
	if t == nil {
		return nil, fmt.Errorf("tensor is nil")
	}
	if t.Dtype() == tensor.Float32 {
		return t, nil
	}
	a, _, err := denseArray(t)
	if err != nil {
		return nil, err
	}
	var out []float32
	switch s := a.Data.(type) {
	case []float64:
		out = convertSlice(s)
	case []int64:
		out = convertSlice(s)
	case []int32:
		out = convertSlice(s)
	case []uint8:
		out = convertSlice(s)
	case []int8:
		out = convertSlice(s)
	default:
		return nil, fmt.Errorf("cannot convert a %s tensor to float32 (want float32, float64 or an integer type)", a.DType)
	}
	return array.FromSlice(a.Shape, out).Dense()
}

// convertSlice converts numbers to float32 with Go's conversion, which rounds
// to nearest even like PyTorch's.
func convertSlice[T float64 | int64 | int32 | uint8 | int8](s []T) []float32 {
	out := make([]float32, len(s))
	for i, v := range s {
		out[i] = float32(v)
	}
	return out
}
