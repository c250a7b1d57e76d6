// Package plot draws attention weights as heatmaps: one panel per layer
// and head in a grid, token labels on both axes (queries down, keys
// across), the weight printed in each cell when there is room, and a
// viridis colour bar shared by every panel. It writes PNG, JPEG and SVG.
//
// It uses the standard library's image packages and the Go fonts from
// golang.org/x/image, so that the labels are anti-aliased and need no
// system fonts.
package plot

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"math"
	"strconv"
)

// Colours of everything that is not a weight.
var (
	background = color.RGBA{0xff, 0xff, 0xff, 0xff}
	textColor  = color.RGBA{0x22, 0x22, 0x22, 0xff}
	subtle     = color.RGBA{0x66, 0x66, 0x66, 0xff}
	axisColor  = color.RGBA{0x44, 0x44, 0x44, 0xff}
	// NaNColor fills cells whose weight is not a number (a fully masked
	// row divides zero by zero), which no colormap value could mean.
	NaNColor = color.RGBA{0xc8, 0xc8, 0xc8, 0xff}
)

// Heatmap is one panel: the attention weights of one head.
type Heatmap struct {
	// Title is drawn above the panel, e.g. "attn · head 0".
	Title string
	// Weights holds one row per query and one column per key, row-major:
	// len(Queries)·len(Keys) values.
	Weights []float32
}

// Figure is a grid of heatmaps, the heads of each layer in turn, sharing
// token labels and one colour scale from 0 to the largest weight.
type Figure struct {
	// Title and Subtitle head the image; either may be empty.
	Title, Subtitle string
	// Queries label the rows of every heatmap, Keys the columns.
	Queries, Keys []string
	// Rows holds the panels of each layer, one per head. The layout flows
	// them through a grid, the first layer's heads first.
	Rows [][]Heatmap
}

// check reports a figure that cannot be drawn.
func (f *Figure) check() error {
	if len(f.Queries) == 0 || len(f.Keys) == 0 {
		return errors.New("plot: a figure needs at least one query and one key label")
	}
	panels := 0
	for r, row := range f.Rows {
		for c, h := range row {
			if want := len(f.Queries) * len(f.Keys); len(h.Weights) != want {
				return fmt.Errorf("plot: panel %q (row %d, column %d) has %d weights, want %d queries × %d keys = %d",
					h.Title, r, c, len(h.Weights), len(f.Queries), len(f.Keys), want)
			}
			panels++
		}
	}
	if panels == 0 {
		return errors.New("plot: a figure needs at least one heatmap")
	}
	return nil
}

// max is the top of the colour scale: the largest finite weight, or 1 when
// every weight is zero (or none is finite).
func (f *Figure) max() float64 {
	vmax := 0.0
	for _, row := range f.Rows {
		for _, h := range row {
			for _, w := range h.Weights {
				if v := float64(w); v > vmax && !math.IsInf(v, 1) {
					vmax = v
				}
			}
		}
	}
	if vmax == 0 {
		return 1
	}
	return vmax
}

// Layout computes where everything of the figure goes.
func (f *Figure) Layout() (*Layout, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	fc, err := newFaces()
	if err != nil {
		return nil, err
	}
	return f.layout(fc)
}

// Draw renders the figure as an image.
func (f *Figure) Draw() (*image.RGBA, error) {
	l, fc, err := f.prepare()
	if err != nil {
		return nil, err
	}
	return f.draw(l, fc), nil
}

// draw renders the figure laid out as l.
func (f *Figure) draw(l *Layout, fc *faces) *image.RGBA {
	img := image.NewRGBA(image.Rectangle{Max: l.Size})
	f.render(raster{img}, l, fc)
	return img
}

// prepare checks the figure and lays it out.
func (f *Figure) prepare() (*Layout, *faces, error) {
	if err := f.check(); err != nil {
		return nil, nil, err
	}
	fc, err := newFaces()
	if err != nil {
		return nil, nil, err
	}
	l, err := f.layout(fc)
	if err != nil {
		return nil, nil, err
	}
	return l, fc, nil
}

// render draws the whole figure on c.
func (f *Figure) render(c canvas, l *Layout, fc *faces) {
	c.fill(image.Rectangle{Max: l.Size}, background)
	y := margin
	if f.Title != "" {
		c.text(fc.figureTitle, textColor, margin, y, start, f.Title)
		y += lineHeight(fc.figureTitle) + titleGap
	}
	if sub := f.subtitle(l); sub != "" {
		c.text(fc.label, subtle, margin, y, start, sub)
	}
	vmax := f.max()
	for r, row := range f.Rows {
		for h, hm := range row {
			f.drawPanel(c, l, fc, r, h, hm, vmax)
		}
	}
	drawBar(c, l, fc, vmax)
}

// subtitle is the figure's subtitle, with a note on what a cell shows when
// it stands for a square of tokens.
func (f *Figure) subtitle(l *Layout) string {
	if l.Bin == 1 {
		return f.Subtitle
	}
	note := fmt.Sprintf("each cell: the largest weight of %d×%d tokens", l.Bin, l.Bin)
	if f.Subtitle == "" {
		return note
	}
	return f.Subtitle + " · " + note
}

// drawPanel draws the heatmap of layer r and head h with its title and
// token labels.
func (f *Figure) drawPanel(c canvas, l *Layout, fc *faces, r, h int, hm Heatmap, vmax float64) {
	heat := l.HeatmapRect(r, h)
	panel := l.PanelRect(r, h)
	titleX := max(panel.Min.X, heat.Min.X+(heat.Dx()-width(fc.panelTitle, hm.Title))/2)
	c.text(fc.panelTitle, textColor, titleX, panel.Min.Y, start, hm.Title)

	for i := range l.Cells.Y {
		for j := range l.Cells.X {
			w := f.cellWeight(l, hm, i, j)
			fill := NaNColor
			if !math.IsNaN(w) {
				fill = Viridis(w / vmax)
			}
			cell := l.CellRect(r, h, i, j)
			c.fill(cell, fill)
			// Zero is left blank: it is what a mask leaves, and empty
			// cells make the mask's shape stand out.
			if l.Values && w != 0 && !math.IsNaN(w) {
				ink := textColor
				if isDark(fill) {
					ink = background
				}
				y := cell.Min.Y + (cell.Dy()-lineHeight(fc.value))/2
				c.text(fc.value, ink, cell.Min.X+cell.Dx()/2, y, middle, strconv.FormatFloat(w, 'f', 2, 64))
			}
		}
	}

	labelH := lineHeight(fc.label)
	for i := 0; i < l.Cells.Y; i += l.QueryStep {
		y := heat.Min.Y + i*l.Cell + (l.Cell-labelH)/2
		c.text(fc.label, textColor, heat.Min.X-labelPad, y, end, f.Queries[i*l.Bin])
	}
	for j := 0; j < l.Cells.X; j += l.KeyStep {
		s := f.Keys[j*l.Bin]
		centre := heat.Min.X + j*l.Cell + l.Cell/2
		if l.KeysUp {
			c.textUp(fc.label, textColor, centre, heat.Max.Y+labelPad, s)
		} else {
			c.text(fc.label, textColor, centre, heat.Max.Y+labelPad, middle, s)
		}
	}
}

// cellWeight is the weight cell (i, j) of a heatmap shows: its token's, or
// the largest of its square of tokens. The largest rather than the mean,
// so that a thin diagonal or a single key every query attends to keeps its
// colour when the picture shrinks. NaN wins, as in torch.amax: a NaN is
// news and must not be hidden by its neighbours.
func (f *Figure) cellWeight(l *Layout, hm Heatmap, i, j int) float64 {
	keys := len(f.Keys)
	if l.Bin == 1 {
		return float64(hm.Weights[i*keys+j])
	}
	w := math.Inf(-1)
	for q := i * l.Bin; q < min((i+1)*l.Bin, len(f.Queries)); q++ {
		for k := j * l.Bin; k < min((j+1)*l.Bin, keys); k++ {
			v := float64(hm.Weights[q*keys+k])
			if math.IsNaN(v) {
				return v
			}
			w = max(w, v)
		}
	}
	return w
}
