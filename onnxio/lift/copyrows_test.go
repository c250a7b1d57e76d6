package lift

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// TestCopyRowsReadsViews: a (2, 2, 3) weight input read as (2, 6) and
// transposed gives rows 2:4 of the (6, 2) transpose; a view that does not
// hold the input's elements is an error.
func TestCopyRowsReadsViews(t *testing.T) {
	src := tensor.New(tensor.WithShape(2, 2, 3), tensor.WithBacking([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}))
	dst := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking(make([]float32, 6)))
	// (2, 6) = [[0..5], [6..11]]; transposed (6, 2): row r = (r, 6+r).
	require.NoError(t, copyRows(dst, src, ParamInput{Transposed: true, Lo: 2, Hi: 4, At: 1, View: []int{2, 6}}))
	require.Equal(t, []float32{0, 0, 2, 8, 3, 9}, dst.Data())
	require.ErrorContains(t, copyRows(dst, src, ParamInput{Lo: 0, Hi: 1, View: []int{5, 2}}), "cannot be read as")
}
