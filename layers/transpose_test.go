package layers

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestTranspose: x.transpose(0, 1) of a (2, 3, 2) tensor, as numpy's
// swapaxes gives it.
func TestTranspose(t *testing.T) {
	x := tensor.New(tensor.WithShape(2, 3, 2), tensor.WithBacking([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}))
	got, err := (&Transpose{Dim0: 0, Dim1: 1}).Forward(nil, []*tensor.Dense{x})
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{3, 2, 2}, got.Shape())
	require.Equal(t, []float32{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}, got.Data())
}
