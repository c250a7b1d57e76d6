package layers

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestFirstPool: the first token of each sequence, as hidden_states[:, 0].
func TestFirstPool(t *testing.T) {
	x := tensor.New(tensor.WithShape(2, 3, 2), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}))
	got, err := (&FirstPool{}).Forward(nil, []*tensor.Dense{x})
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{2, 2}, got.Shape())
	require.Equal(t, []float32{1, 2, 7, 8}, got.Data())
}
