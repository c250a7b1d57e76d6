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

// TestBiasRowFollowsItsDefinition checks Bias.Row, with the mask spans it
// reads, against its definition element by element: −Inf where the
// frontier hides a key, else the ALiBi term plus each mask in order, and
// that Hides names the same −Inf entries a bool mask or the frontier make.
func TestBiasRowFollowsItsDefinition(t *testing.T) {
	inf := float32(math.Inf(-1))
	values := []float32{0, 1, -2, 0, 3, 0.5, 0.25, -1}
	add := Mask{Kind: MaskAdd, Values: values, SI: 4, SJ: 1, Cols: 4, Past: 0}
	keep := Mask{Bools: []bool{true, false, true, true, false, true, true, true}, SH: 4, SJ: 1, Cols: 4, Past: inf}
	for _, f := range []Frontier{Unbounded, {Causal: true, Left: -1, Right: -1}, {Causal: true, Left: 1, Right: -1}} {
		for _, slopes := range [][]float32{nil, {0.5, 0.125}} {
			for _, masks := range [][]Mask{nil, {add}, {keep}, {add, keep}} {
				bs := Bias{Frontier: f, Slopes: slopes, Masks: masks}
				for k0 := 0; k0 <= 2; k0++ {
					row := make([]float32, 5)
					for h := range 2 {
						for i := range 2 {
							q := i + 3
							bs.Row(row, 0, h, i, q, k0)
							for j, got := range row {
								k := k0 + j
								want, hidden := float32(0), f.Hides(q, k)
								for _, m := range masks {
									hidden = hidden || m.Hides() && math.IsInf(float64(m.At(0, h, i, k)), -1)
								}
								if f.Hides(q, k) {
									want = inf
								} else {
									if slopes != nil {
										want = slopes[h] * float32(k-q)
									}
									for _, m := range masks {
										want += m.At(0, h, i, k)
									}
								}
								require.Equal(t, want, got, "%+v slopes %v masks %d k0 %d head %d query %d key %d", f, slopes, len(masks), k0, h, i, k)
								assert.Equal(t, hidden, bs.Hides(0, h, i, q, k), "Hides, key %d", k)
							}
						}
					}
				}
			}
		}
	}
}
