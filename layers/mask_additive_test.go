package layers

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestAdditiveMask: (1 - m) * fill of an attention_mask, as Hugging Face's
// extended attention mask, from int64 and float32 masks.
func TestAdditiveMask(t *testing.T) {
	want := []float32{0, 0, -10000, 0, -10000, -10000}
	for _, m := range []*tensor.Dense{
		tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]int64{1, 1, 0, 1, 0, 0})),
		tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 1, 0, 1, 0, 0})),
	} {
		got, err := (&AdditiveMask{Fill: -10000}).Forward(nil, []*tensor.Dense{m})
		require.NoError(t, err)
		require.Equal(t, tensor.Shape{2, 1, 1, 3}, got.Shape())
		require.Equal(t, want, got.Data())
	}
	require.Error(t, (&AdditiveMask{Fill: 1e39}).Validate())
}
