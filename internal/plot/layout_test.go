package plot

import (
	"fmt"
	"image"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLayoutArithmetic checks that panels tile the image: the panels flow
// through the grid layer by layer, each column adds a panel and a gap
// across, each row a panel and a gap down, and the image ends a margin
// below the last row.
func TestLayoutArithmetic(t *testing.T) {
	base, err := causalFigure(1, 1, 6).Layout()
	require.NoError(t, err)
	for _, tc := range []struct {
		rows, heads int
		grid        image.Point
	}{
		{1, 2, image.Pt(2, 1)},
		{1, 4, image.Pt(2, 2)},
		{2, 1, image.Pt(2, 1)},
		{3, 2, image.Pt(2, 3)},
		{1, 12, image.Pt(4, 3)},
		{2, 12, image.Pt(6, 4)},
	} {
		l, err := causalFigure(tc.rows, tc.heads, 6).Layout()
		require.NoError(t, err)
		assert.Equal(t, tc.grid, l.Grid, "%d×%d", tc.rows, tc.heads)
		assert.Equal(t, base.Panel, l.Panel, "panels do not depend on how many there are")
		assert.Equal(t, base.Size.X+(l.Grid.X-1)*(l.Panel.X+l.Gap.X), l.Size.X, "%d×%d", tc.rows, tc.heads)
		assert.Equal(t, l.Origin.Y+l.Grid.Y*l.Panel.Y+(l.Grid.Y-1)*l.Gap.Y+margin, l.Size.Y, "%d×%d", tc.rows, tc.heads)
		for r := range tc.rows {
			for c := range tc.heads {
				k := r*tc.heads + c
				want := l.Origin.Add(image.Pt(k%l.Grid.X*(l.Panel.X+l.Gap.X), k/l.Grid.X*(l.Panel.Y+l.Gap.Y)))
				assert.Equal(t, want, l.PanelRect(r, c).Min, "layer %d head %d", r, c)
				assert.True(t, l.PanelRect(r, c).In(image.Rectangle{Max: l.Size}))
			}
		}
		assert.Equal(t, image.Rectangle{}, l.PanelRect(tc.rows, 0), "no such layer")
		last := l.PanelRect(tc.rows-1, tc.heads-1)
		assert.Less(t, last.Max.X, l.Bar.Min.X, "the colour bar is right of every panel")
		assert.Equal(t, l.HeatmapRect(0, 0).Min.Y, l.Bar.Min.Y)
		assert.Equal(t, last.Min.Y+l.Heatmap.Y+l.Cells.Y*l.Cell, l.Bar.Max.Y)
	}
}

func TestColumns(t *testing.T) {
	for _, tc := range []struct {
		heads []int
		want  int
	}{
		{[]int{1}, 1},
		{[]int{2}, 2},
		{[]int{4}, 2},
		{[]int{6}, 3},
		{[]int{8}, 4},
		{[]int{12}, 4},      // 4×3
		{[]int{16}, 4},      // 4×4
		{[]int{32}, 8},      // 8×4
		{[]int{12, 12}, 6},  // each layer two rows of 6
		{[]int{4, 4, 4}, 4}, // a row per layer
		{[]int{1, 1, 1, 1, 1, 1}, 3},
		{[]int{2, 2, 2, 2}, 4}, // two layers a row
		{[]int{3, 1}, 2},
		{rep(12, 12), 12}, // BERT-base: a row per layer
		{rep(12, 32), 32}, // 32 heads of 12 layers: a row per layer
	} {
		assert.Equal(t, tc.want, columns(tc.heads), "%v", tc.heads)
	}
}

func rep(n, v int) []int {
	xs := make([]int, n)
	for i := range xs {
		xs[i] = v
	}
	return xs
}

// TestLayoutShrinksToFit checks that big figures stay within MaxSide a
// side: cells shrink to a pixel, then stand for squares of tokens; only a
// figure too big at one pixel per heatmap is refused.
func TestLayoutShrinksToFit(t *testing.T) {
	for _, tc := range []struct {
		rows, heads, tokens int
		cell, bin           int
	}{
		{1, 12, 64, 8, 1},   // the strip, now 4×3 at the full size
		{12, 12, 64, 4, 1},  // every head of BERT-base, smaller cells
		{12, 12, 512, 1, 3}, // at T=512 a cell is 3×3 tokens
		{1, 1, 5000, 1, 2},
	} {
		f := causalFigure(tc.rows, tc.heads, tc.tokens)
		l, err := f.Layout()
		require.NoError(t, err)
		name := fmt.Sprintf("%d×%d heads of %d tokens", tc.rows, tc.heads, tc.tokens)
		assert.LessOrEqual(t, l.Size.X, MaxSide, name)
		assert.LessOrEqual(t, l.Size.Y, MaxSide, name)
		assert.Equal(t, tc.cell, l.Cell, name)
		assert.Equal(t, tc.bin, l.Bin, name)
		assert.Equal(t, image.Pt(ceilDiv(tc.tokens, tc.bin), ceilDiv(tc.tokens, tc.bin)), l.Cells, name)
		if l.Cell == heatmapSide/tc.tokens {
			continue // the usual size: nothing was shrunk
		}
		// The next larger scale would not fit.
		bigger := scale{l.Cell + 1, 1}
		if l.Bin > 1 {
			bigger = scale{1, l.Bin - 1}
		}
		fc, err := newFaces()
		require.NoError(t, err)
		heads := rep(tc.rows, tc.heads)
		big := f.place(fc, l.Grid.X, heads, f.measure(fc), bigger)
		assert.True(t, big.Size.X > MaxSide || big.Size.Y > MaxSide, "%s: %v at %+v", name, big.Size, bigger)
	}

	f := &Figure{Queries: []string{"a"}, Keys: []string{"a"}}
	for i := range 5000 {
		f.Rows = append(f.Rows, []Heatmap{{Title: fmt.Sprintf("layer%d · head 0", i), Weights: []float32{1}}})
	}
	_, err := f.Layout()
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Contains(t, err.Error(), "plot: the figure is too large: 5000 panels in a")
	assert.Contains(t, err.Error(), "over the limit of 4096 a side")
}

func TestLayoutCellsAndLabels(t *testing.T) {
	for _, tc := range []struct {
		tokens                int
		cell, step            int
		values, keysUp, lines bool
	}{
		{tokens: 3, cell: maxCell, step: 1, values: true, lines: true},
		{tokens: 8, cell: maxCell, step: 1, values: true, lines: true},
		{tokens: 40, cell: 13, step: 2, keysUp: true},
		{tokens: 400, cell: 1, step: 16, keysUp: true},
	} {
		f := causalFigure(1, 1, tc.tokens)
		l, err := f.Layout()
		require.NoError(t, err)
		assert.Equal(t, tc.cell, l.Cell, "%d tokens", tc.tokens)
		assert.Equal(t, image.Pt(tc.tokens, tc.tokens), l.Tokens)
		assert.Equal(t, tc.step, l.QueryStep, "%d tokens", tc.tokens)
		assert.Equal(t, tc.values, l.Values, "%d tokens", tc.tokens)
		assert.Equal(t, tc.keysUp, l.KeysUp, "%d tokens", tc.tokens)
		heat := l.HeatmapRect(0, 0)
		assert.Equal(t, image.Pt(tc.tokens*l.Cell, tc.tokens*l.Cell), heat.Size())
		side := l.Cell
		if tc.lines {
			side-- // a line of background between cells
		}
		assert.Equal(t, image.Pt(side, side), l.CellRect(0, 0, 1, 2).Size())
		assert.Equal(t, heat.Min.Add(image.Pt(2*l.Cell, l.Cell)), l.CellRect(0, 0, 1, 2).Min)
	}
}

// TestLayoutFitsLongLabels checks that cells widen for words that would not
// fit under them, up to a limit, and that longer words are turned upright.
func TestLayoutFitsLongLabels(t *testing.T) {
	words := func(ws ...string) *Figure {
		f := causalFigure(1, 1, len(ws))
		f.Queries, f.Keys = ws, ws
		return f
	}
	short, err := words("Your", "journey", "starts").Layout()
	require.NoError(t, err)
	assert.Equal(t, maxCell, short.Cell)
	assert.False(t, short.KeysUp)

	longer, err := words("This", "is", "an", "example", "sentence").Layout()
	require.NoError(t, err)
	assert.Greater(t, longer.Cell, maxCell)
	assert.LessOrEqual(t, longer.Cell, wideCell)
	assert.False(t, longer.KeysUp)

	longest, err := words("a", "incomprehensibilities").Layout()
	require.NoError(t, err)
	assert.Equal(t, wideCell, longest.Cell)
	assert.True(t, longest.KeysUp)
}
