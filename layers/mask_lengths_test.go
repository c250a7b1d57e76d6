package layers

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestLengthsMask: lengths (2, 0, 4) over 3 tokens keep the first 2, none
// and all 3 keys (a length past the tokens keeps them all), in int64 and
// as float32 counts.
func TestLengthsMask(t *testing.T) {
	x := tensor.New(tensor.WithShape(3, 3, 2), tensor.WithBacking(make([]float32, 18)))
	want := []float32{1, 1, 0, 0, 0, 0, 1, 1, 1}
	for _, lengths := range []*tensor.Dense{
		tensor.New(tensor.WithShape(3), tensor.WithBacking([]int64{2, 0, 4})),
		tensor.New(tensor.WithShape(3), tensor.WithBacking([]float32{2, 0, 4})),
	} {
		got, err := (&LengthsMask{}).Forward(nil, []*tensor.Dense{lengths, x})
		require.NoError(t, err)
		require.Equal(t, tensor.Shape{3, 1, 1, 3}, got.Shape())
		require.Equal(t, want, got.Data())
	}
}
