package attn

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFrontierVisibleAgreesWithHides checks, over every small frontier,
// query position and key range, that the range Visible gives is exactly
// the keys Hides does not hide, and that MayHide says whether any is.
func TestFrontierVisibleAgreesWithHides(t *testing.T) {
	for _, causal := range []bool{false, true} {
		for left := -1; left <= 3; left++ {
			for right := -1; right <= 3; right++ {
				f := Frontier{Causal: causal, Left: left, Right: right}
				for k0 := -2; k0 <= 2; k0++ {
					for n := 0; n <= 5; n++ {
						for q := -3; q <= 7; q++ {
							from, to := f.Visible(q, k0, n)
							require.True(t, 0 <= from && from <= to && to <= n, "%+v q %d k0 %d n %d: [%d, %d)", f, q, k0, n, from, to)
							for j := range n {
								assert.Equal(t, j < from || j >= to, f.Hides(q, k0+j), "%+v q %d key %d", f, q, k0+j)
							}
						}
						for q0 := -2; q0 <= 4; q0++ {
							for nq := 0; nq <= 3; nq++ {
								hidden := false
								for i := range nq {
									for j := range n {
										hidden = hidden || f.Hides(q0+i, k0+j)
									}
								}
								assert.Equal(t, hidden, f.MayHide(q0, nq, k0, n), "%+v queries %d+%d keys %d+%d", f, q0, nq, k0, n)
							}
						}
					}
				}
			}
		}
	}
}

// TestMaskRowAgreesWithAt checks Row's fast copy and its loop against At,
// for float, bool-coded float and bool masks with columns past Cols.
func TestMaskRowAgreesWithAt(t *testing.T) {
	inf := float32(math.Inf(-1))
	values := []float32{0, 1, -2, 0, 3, 0.5}
	masks := []Mask{
		{Kind: MaskAdd, Values: values, SI: 3, SJ: 1, Cols: 3, Past: inf},
		{Kind: MaskKeep, Values: values, SB: 3, SJ: 1, Cols: 3},
		{Kind: MaskDrop, Values: values, SH: 2, SJ: 3, Cols: 2},
		{Bools: []bool{true, false, true, true}, SI: 2, SJ: 1, Cols: 2, Past: inf},
	}
	for k, m := range masks {
		row := make([]float32, 4)
		for i := range 2 {
			m.Row(row, 1, 1, i)
			for j, v := range row {
				assert.Equal(t, m.At(1, 1, i, j), v, "mask %d row %d key %d", k, i, j)
			}
		}
	}
	assert.Equal(t, inf, masks[1].At(0, 0, 0, 0), "keep: zero hides")
	assert.Equal(t, float32(0), masks[1].At(0, 0, 0, 1), "keep: nonzero attends")
	assert.Equal(t, inf, masks[3].At(0, 0, 0, 1), "bool: false hides")
	assert.Equal(t, inf, masks[0].At(0, 0, 0, 3), "past the columns: Past")
}
