package plot

import (
	"image"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLayoutArithmetic checks that panels tile the image: each extra head
// adds a panel and a gap across, each extra layer a panel and a gap down,
// and the image ends a margin below the last row.
func TestLayoutArithmetic(t *testing.T) {
	base, err := causalFigure(1, 1, 6).Layout()
	require.NoError(t, err)
	for _, tc := range []struct{ rows, heads int }{{1, 2}, {1, 4}, {2, 1}, {3, 2}} {
		l, err := causalFigure(tc.rows, tc.heads, 6).Layout()
		require.NoError(t, err)
		assert.Equal(t, image.Pt(tc.heads, tc.rows), l.Grid)
		assert.Equal(t, base.Panel, l.Panel, "panels do not depend on how many there are")
		assert.Equal(t, base.Size.X+(tc.heads-1)*(l.Panel.X+l.Gap.X), l.Size.X, "%d heads", tc.heads)
		assert.Equal(t, l.Origin.Y+tc.rows*l.Panel.Y+(tc.rows-1)*l.Gap.Y+margin, l.Size.Y, "%d layers", tc.rows)
		last := l.PanelRect(tc.rows-1, tc.heads-1)
		assert.Less(t, last.Max.X, l.Bar.Min.X, "the colour bar is right of every panel")
		assert.Equal(t, l.HeatmapRect(0, 0).Min.Y, l.Bar.Min.Y)
		assert.Equal(t, l.HeatmapRect(tc.rows-1, 0).Max.Y, l.Bar.Max.Y)
	}
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
		{tokens: 400, cell: minCell, step: 4, keysUp: true},
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
