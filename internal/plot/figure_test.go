package plot

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// causalFigure is rows × heads panels of t tokens with causal weights:
// query i spreads its weight evenly over keys 0..i, scaled per panel so
// that every panel differs.
func causalFigure(rows, heads, t int) *Figure {
	f := &Figure{Title: "test · attention weights", Subtitle: "rows: queries · columns: keys"}
	for i := range t {
		f.Queries = append(f.Queries, fmt.Sprintf("t%d", i))
	}
	f.Keys = f.Queries
	for r := range rows {
		var row []Heatmap
		for h := range heads {
			w := make([]float32, t*t)
			for i := range t {
				for j := 0; j <= i; j++ {
					w[i*t+j] = float32(1/float64(i+1)) / float32(1+r+h)
				}
			}
			row = append(row, Heatmap{Title: fmt.Sprintf("layer%d · head %d", r, h), Weights: w})
		}
		f.Rows = append(f.Rows, row)
	}
	return f
}

// probe is a pixel of cell (i, j) of panel (r, c) away from the number
// printed in its middle.
func probe(img image.Image, l *Layout, r, c, i, j int) color.RGBA {
	p := l.CellRect(r, c, i, j).Min.Add(image.Pt(2, 2))
	return color.RGBAModel.Convert(img.At(p.X, p.Y)).(color.RGBA)
}

func TestDrawColoursEveryCellByItsWeight(t *testing.T) {
	f := causalFigure(2, 3, 5)
	f.Rows[1][2].Weights[3*5+1] = float32(math.NaN())
	img, err := f.Draw()
	require.NoError(t, err)
	l, err := f.Layout()
	require.NoError(t, err)
	require.Equal(t, l.Size, img.Bounds().Size())

	for r, row := range f.Rows {
		for c, h := range row {
			for i := range 5 {
				for j := range 5 {
					w := float64(h.Weights[i*5+j])
					want := Viridis(w) // the largest weight is 1
					if math.IsNaN(w) {
						want = NaNColor
					}
					require.Equal(t, want, probe(img, l, r, c, i, j), "panel (%d, %d) cell (%d, %d) weight %g", r, c, i, j, w)
				}
			}
		}
	}
	// The first query attends only to itself (yellow); what the mask hides
	// is 0 (dark purple).
	assert.Equal(t, color.RGBA{0xfd, 0xe7, 0x25, 0xff}, probe(img, l, 0, 0, 0, 0))
	assert.Equal(t, color.RGBA{0x44, 0x01, 0x54, 0xff}, probe(img, l, 0, 0, 0, 4))

	// The colour bar runs from 0 at the bottom to the largest weight at the top.
	bar := l.Bar
	assert.Equal(t, Viridis(0), img.RGBAAt(bar.Min.X+bar.Dx()/2, bar.Max.Y-1))
	assert.Equal(t, Viridis(1), img.RGBAAt(bar.Min.X+bar.Dx()/2, bar.Min.Y))
}

func TestDrawScalesColoursToTheLargestWeight(t *testing.T) {
	f := &Figure{
		Queries: []string{"a", "b"},
		Keys:    []string{"a", "b"},
		Rows:    [][]Heatmap{{{Title: "h", Weights: []float32{0.1, 0.4, 0.2, 0}}}},
	}
	img, err := f.Draw()
	require.NoError(t, err)
	l, err := f.Layout()
	require.NoError(t, err)
	assert.Equal(t, Viridis(0.25), probe(img, l, 0, 0, 0, 0))
	assert.Equal(t, Viridis(1), probe(img, l, 0, 0, 0, 1))
	assert.Equal(t, Viridis(0.5), probe(img, l, 0, 0, 1, 0))
	assert.Equal(t, Viridis(0), probe(img, l, 0, 0, 1, 1))
}

// TestDrawWritesText checks that titles, labels and values leave ink: the
// title band and the query-label gutter are not plain background, and a
// cell with a printed value holds more than its fill colour.
func TestDrawWritesText(t *testing.T) {
	f := causalFigure(1, 1, 4)
	img, err := f.Draw()
	require.NoError(t, err)
	l, err := f.Layout()
	require.NoError(t, err)
	inked := func(r image.Rectangle, paper color.RGBA) int {
		n := 0
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				if img.RGBAAt(x, y) != paper {
					n++
				}
			}
		}
		return n
	}
	white := color.RGBA{0xff, 0xff, 0xff, 0xff}
	assert.Greater(t, inked(image.Rect(0, 0, l.Size.X, l.Origin.Y), white), 200, "figure title")
	heat := l.HeatmapRect(0, 0)
	assert.Greater(t, inked(image.Rect(l.Origin.X, heat.Min.Y, heat.Min.X, heat.Max.Y), white), 50, "query labels")
	assert.Greater(t, inked(image.Rect(heat.Min.X, heat.Max.Y, heat.Max.X, l.PanelRect(0, 0).Max.Y), white), 50, "key labels")
	assert.Greater(t, inked(l.CellRect(0, 0, 1, 0), Viridis(0.5)), 20, "the value 0.50")
	assert.Zero(t, inked(l.CellRect(0, 0, 0, 1), Viridis(0)), "a masked cell holds no number")
}

func TestFigureErrors(t *testing.T) {
	good := causalFigure(1, 1, 3)
	for _, tc := range []struct {
		name string
		edit func(f *Figure)
		want string
	}{
		{"no panels", func(f *Figure) { f.Rows = nil }, "at least one heatmap"},
		{"empty row", func(f *Figure) { f.Rows = [][]Heatmap{{}} }, "at least one heatmap"},
		{"no labels", func(f *Figure) { f.Queries = nil }, "at least one query and one key"},
		{"short weights", func(f *Figure) { f.Rows[0][0].Weights = f.Rows[0][0].Weights[:8] }, `panel "layer0 · head 0" (row 0, column 0) has 8 weights, want 3 queries × 3 keys = 9`},
		{"too big", func(f *Figure) {
			f.Rows = nil
			for range 10000 {
				f.Rows = append(f.Rows, []Heatmap{{Title: "h", Weights: make([]float32, 9)}})
			}
		}, "even at one pixel per panel, over the limit of 4096 a side"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := *good
			f.Rows = [][]Heatmap{{{Title: good.Rows[0][0].Title, Weights: append([]float32(nil), good.Rows[0][0].Weights...)}}}
			tc.edit(&f)
			_, err := f.Draw()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			_, err = f.Layout()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "attn.png")
	f := causalFigure(1, 2, 3)
	require.NoError(t, f.WriteFile(path))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(data))
	require.NoError(t, err)
	l, err := f.Layout()
	require.NoError(t, err)
	assert.Equal(t, l.Size, img.Bounds().Size())

	// A figure that cannot be drawn leaves the old file as it was.
	bad := causalFigure(1, 1, 3)
	bad.Rows[0][0].Weights = nil
	require.Error(t, bad.WriteFile(path))
	again, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, data, again)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left")

	require.Error(t, f.WriteFile(filepath.Join(dir, "missing", "attn.png")))
}
