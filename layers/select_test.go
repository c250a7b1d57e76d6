package layers

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestSelect: x[..., 1] of a (2, 2, 3) tensor.
func TestSelect(t *testing.T) {
	x := tensor.New(tensor.WithShape(2, 2, 3), tensor.WithBacking([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}))
	got, err := (&Select{Index: 1}).Forward(nil, []*tensor.Dense{x})
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{2, 2}, got.Shape())
	require.Equal(t, []float32{1, 4, 7, 10}, got.Data())
}
