// Package plot draws attention weights as heatmaps in a PNG image: one
// panel per layer and head, token labels on both axes (queries down, keys
// across), the weight printed in each cell when there is room, and a
// viridis colour bar shared by every panel.
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
	"image/draw"
	"image/png"
	"io"
	"math"
	"strconv"

	"github.com/attnrun/attnrun/internal/atomicfile"
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

// Figure is a grid of heatmaps, one row per layer and one panel per head,
// sharing token labels and one colour scale from 0 to the largest weight.
type Figure struct {
	// Title and Subtitle head the image; either may be empty.
	Title, Subtitle string
	// Queries label the rows of every heatmap, Keys the columns.
	Queries, Keys []string
	// Rows are the panels, top to bottom and left to right.
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

// Draw renders the figure.
func (f *Figure) Draw() (*image.RGBA, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	fc, err := newFaces()
	if err != nil {
		return nil, err
	}
	l, err := f.layout(fc)
	if err != nil {
		return nil, err
	}
	img := image.NewRGBA(image.Rectangle{Max: l.Size})
	draw.Draw(img, img.Bounds(), image.NewUniform(background), image.Point{}, draw.Src)

	y := margin
	if f.Title != "" {
		drawText(img, fc.figureTitle, textColor, margin, y, f.Title)
		y += lineHeight(fc.figureTitle) + titleGap
	}
	if f.Subtitle != "" {
		drawText(img, fc.label, subtle, margin, y, f.Subtitle)
	}
	vmax := f.max()
	for r, row := range f.Rows {
		for c, h := range row {
			f.drawPanel(img, l, fc, r, c, h, vmax)
		}
	}
	drawBar(img, l, fc, vmax)
	return img, nil
}

// drawPanel draws one heatmap with its title and token labels.
func (f *Figure) drawPanel(img *image.RGBA, l *Layout, fc *faces, r, c int, h Heatmap, vmax float64) {
	heat := l.HeatmapRect(r, c)
	panel := l.PanelRect(r, c)
	titleX := max(panel.Min.X, heat.Min.X+(heat.Dx()-width(fc.panelTitle, h.Title))/2)
	drawText(img, fc.panelTitle, textColor, titleX, panel.Min.Y, h.Title)

	for i := range f.Queries {
		for j := range f.Keys {
			w := float64(h.Weights[i*len(f.Keys)+j])
			fill := NaNColor
			if !math.IsNaN(w) {
				fill = Viridis(w / vmax)
			}
			cell := l.CellRect(r, c, i, j)
			draw.Draw(img, cell, image.NewUniform(fill), image.Point{}, draw.Src)
			// Zero is left blank: it is what a mask leaves, and empty
			// cells make the mask's shape stand out.
			if l.Values && w != 0 && !math.IsNaN(w) {
				ink := textColor
				if isDark(fill) {
					ink = background
				}
				s := strconv.FormatFloat(w, 'f', 2, 64)
				x := cell.Min.X + (cell.Dx()-width(fc.value, s))/2
				y := cell.Min.Y + (cell.Dy()-lineHeight(fc.value))/2
				drawText(img, fc.value, ink, x, y, s)
			}
		}
	}

	labelH := lineHeight(fc.label)
	for i := 0; i < len(f.Queries); i += l.QueryStep {
		s := f.Queries[i]
		y := heat.Min.Y + i*l.Cell + (l.Cell-labelH)/2
		drawText(img, fc.label, textColor, heat.Min.X-labelPad-width(fc.label, s), y, s)
	}
	for j := 0; j < len(f.Keys); j += l.KeyStep {
		s := f.Keys[j]
		centre := heat.Min.X + j*l.Cell + l.Cell/2
		if l.KeysUp {
			drawTextUp(img, fc.label, textColor, centre, heat.Max.Y+labelPad, s)
		} else {
			drawText(img, fc.label, textColor, centre-width(fc.label, s)/2, heat.Max.Y+labelPad, s)
		}
	}
}

// Encode draws the figure and writes it to w as a PNG.
func (f *Figure) Encode(w io.Writer) error {
	img, err := f.Draw()
	if err != nil {
		return err
	}
	return png.Encode(w, img)
}

// WriteFile draws the figure into a PNG file. The file is replaced
// atomically: it holds the old picture or the new one, never part of one.
func (f *Figure) WriteFile(path string) error {
	img, err := f.Draw()
	if err != nil {
		return err
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return png.Encode(w, img) })
}
