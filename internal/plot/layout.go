package plot

import (
	"errors"
	"fmt"
	"image"
	"math"
	"sort"
)

// Spacing, in pixels.
const (
	margin      = 24 // around the figure
	panelGapX   = 36 // between panels side by side
	panelGapY   = 28 // between rows of panels
	titleGap    = 8  // below a title
	labelPad    = 6  // between a token label and the heatmap
	keyGap      = 10 // at least between upright key labels side by side
	barGap      = 28 // between the panels and the colour bar
	barWidth    = 16
	tickLength  = 4
	maxCell     = 52  // side of a heatmap cell for short inputs
	wideCell    = 72  // the most it grows to fit long key labels
	heatmapSide = 520 // long inputs shrink cells to about this side
	valueCell   = 34  // cells at least this big show their weight as text
	gridCell    = 16  // and at least this big are set apart by a thin line
	// MaxSide bounds the width and the height of a figure, in pixels. A
	// figure that would be bigger is drawn smaller: its cells shrink down
	// to one pixel, then each cell shows a square of several tokens.
	MaxSide = 4096
	// gridAspect is the width-to-height ratio of panels across to panels
	// down that the grid aims for: a little wider than tall, like a screen.
	gridAspect = 1.5
)

// ErrTooLarge is reported (wrapped) when a figure has so many panels that
// it exceeds MaxSide even with heatmaps of one pixel per panel, or an SVG
// more than MaxSVGCells cells.
var ErrTooLarge = errors.New("the figure is too large")

// Layout places every part of a figure. The image is Size. The panels
// flow through a grid of Grid.X columns and Grid.Y rows, the heads of the
// first layer first; PanelRect finds the panel of a layer and head. Inside
// a panel, the heatmap starts at Heatmap and is Cells.X·Cell × Cells.Y·Cell
// pixels. Cell (i, j) shows queries i·Bin to i·Bin+Bin-1 and keys j·Bin to
// j·Bin+Bin-1: one token each when Bin is 1, else the largest weight of the
// square. Token labels are drawn every QueryStep and KeyStep cells.
type Layout struct {
	Size    image.Point // the whole image
	Grid    image.Point // panels across and down
	Origin  image.Point // top-left corner of the grid's first panel
	Panel   image.Point // size of one panel: title, query labels, heatmap, key labels
	Gap     image.Point // space between neighbouring panels
	Heatmap image.Point // top-left corner of the heatmap within its panel
	Cell    int         // side of one heatmap cell, in pixels
	Bin     int         // side of the square of tokens one cell shows
	Tokens  image.Point // key count (X) and query count (Y)
	Cells   image.Point // cells across (keys) and down (queries)
	Bar     image.Rectangle

	// QueryStep and KeyStep thin out the labels of long inputs: every
	// QueryStep-th query cell and KeyStep-th key cell is labelled.
	QueryStep, KeyStep int
	// KeysUp turns the key labels to read upwards when they do not fit
	// side by side under their cells.
	KeysUp bool
	// Values is set when cells are big enough to print their weight.
	Values bool

	// first is the grid index of each layer's first panel.
	first []int
}

// scale is a size of the heatmaps: cell pixels per bin tokens.
type scale struct{ cell, bin int }

// layout computes the figure's layout with the text measured in fc: the
// grid that suits its panels, at the largest scale within MaxSide.
func (f *Figure) layout(fc *faces) (*Layout, error) {
	heads := make([]int, len(f.Rows))
	for r, row := range f.Rows {
		heads[r] = len(row)
	}
	cols := columns(heads)
	m := f.measure(fc)
	tokens := max(len(f.Queries), len(f.Keys))

	// Cells are as big as the heatmap's side allows, up to maxCell, and a
	// little bigger still when that lets the key labels stand upright.
	fit := heatmapSide / tokens
	best := max(1, min(maxCell, fit))
	if best == maxCell {
		best = max(best, min(m.key+keyGap, wideCell, fit))
	}
	// The scales from the largest down: cells of best pixels to one, then
	// cells of one pixel showing 2, 3, ... tokens. A smaller scale never
	// makes the image bigger, so the first that fits is found by bisection.
	scaleAt := func(i int) scale {
		if i < best {
			return scale{best - i, 1}
		}
		return scale{1, i - best + 2}
	}
	n := best + tokens - 1
	fits := func(i int) bool {
		l := f.place(fc, cols, heads, m, scaleAt(i))
		return l.Size.X <= MaxSide && l.Size.Y <= MaxSide
	}
	i := sort.Search(n, fits)
	if i == n {
		l := f.place(fc, cols, heads, m, scaleAt(n-1))
		return nil, fmt.Errorf("plot: %w: %d panels in a %d×%d grid need %d×%d pixels even at one pixel per panel, over the limit of %d a side",
			ErrTooLarge, sum(heads), l.Grid.X, l.Grid.Y, l.Size.X, l.Size.Y, MaxSide)
	}
	return f.place(fc, cols, heads, m, scaleAt(i)), nil
}

// widths are the widths of what every scale draws alike, measured once.
type widths struct {
	key, title, tick int // the widest key label, panel title and tick label
}

func (f *Figure) measure(fc *faces) widths {
	m := widths{key: maxWidth(fc, f.Keys, 1)}
	for _, row := range f.Rows {
		for _, h := range row {
			m.title = max(m.title, width(fc.panelTitle, h.Title))
		}
	}
	for _, t := range ticks(f.max()) {
		m.tick = max(m.tick, width(fc.label, t.label))
	}
	return m
}

// place lays the figure out at scale s, with cols panels across; heads
// counts the panels of each layer.
func (f *Figure) place(fc *faces, cols int, heads []int, m widths, s scale) *Layout {
	l := &Layout{
		Tokens: image.Pt(len(f.Keys), len(f.Queries)),
		Gap:    image.Pt(panelGapX, panelGapY),
		Cell:   s.cell,
		Bin:    s.bin,
	}
	l.Cells = image.Pt(ceilDiv(l.Tokens.X, s.bin), ceilDiv(l.Tokens.Y, s.bin))
	panels := 0
	for _, h := range heads {
		l.first = append(l.first, panels)
		panels += h
	}
	l.Grid = image.Pt(cols, ceilDiv(panels, cols))
	l.Values = l.Cell >= valueCell && l.Bin == 1

	labelH := lineHeight(fc.label)
	l.QueryStep = ceilDiv(labelH, l.Cell)
	queryW := maxWidth(fc, f.Queries, l.QueryStep*l.Bin)
	l.KeyStep = 1
	keyBand := labelH
	if m.key+keyGap > l.Cell || l.Bin > 1 {
		l.KeysUp = true
		l.KeyStep = ceilDiv(labelH, l.Cell)
		keyBand = maxWidth(fc, f.Keys, l.KeyStep*l.Bin)
	}

	heatW, heatH := l.Cells.X*l.Cell, l.Cells.Y*l.Cell
	gutter := queryW + labelPad
	l.Heatmap = image.Pt(gutter, lineHeight(fc.panelTitle)+titleGap)
	l.Panel = image.Pt(gutter+max(heatW, m.title), l.Heatmap.Y+heatH+labelPad+keyBand)

	top := margin
	headW := 0
	if f.Title != "" {
		top += lineHeight(fc.figureTitle) + titleGap
		headW = width(fc.figureTitle, f.Title)
	}
	if sub := f.subtitle(l); sub != "" {
		top += labelH + titleGap
		headW = max(headW, width(fc.label, sub))
	}
	l.Origin = image.Pt(margin, top)

	gridW := l.Grid.X*l.Panel.X + (l.Grid.X-1)*l.Gap.X
	gridH := l.Grid.Y*l.Panel.Y + (l.Grid.Y-1)*l.Gap.Y
	barX := l.Origin.X + gridW + barGap
	barTop := l.Origin.Y + l.Heatmap.Y
	barBottom := l.Origin.Y + (l.Grid.Y-1)*(l.Panel.Y+l.Gap.Y) + l.Heatmap.Y + heatH
	l.Bar = image.Rect(barX, barTop, barX+barWidth, barBottom)

	l.Size.X = max(l.Bar.Max.X+tickLength+labelPad+m.tick, margin+headW) + margin
	l.Size.Y = l.Origin.Y + gridH + margin
	return l
}

// columns chooses how many panels go across the grid, given the number of
// heads of each layer. The grid aims at gridAspect (panels are about
// square), leaves few places empty, and, when every layer has the same
// number of heads, lets each layer fill whole rows or share a row evenly
// with others: with 12 heads, one layer is a 4×3 grid and twelve layers
// are 12×12, a row per layer.
func columns(heads []int) int {
	panels := sum(heads)
	same := true
	for _, h := range heads {
		same = same && h == heads[0]
	}
	best, bestScore := 1, math.Inf(1)
	for cols := 1; cols <= panels; cols++ {
		rows := ceilDiv(panels, cols)
		empty := float64(rows*cols-panels) / float64(rows*cols)
		score := math.Abs(math.Log(float64(cols)/float64(rows)/gridAspect)) + 3*empty
		if h := heads[0]; same && cols%h != 0 && h%cols != 0 {
			score++ // a layer would start in the middle of a row
		}
		if score < bestScore {
			best, bestScore = cols, score
		}
	}
	return best
}

// PanelRect is the rectangle of the panel of layer r (Figure.Rows[r]) and
// head c; the empty rectangle for a layer the figure does not have.
func (l *Layout) PanelRect(r, c int) image.Rectangle {
	if r < 0 || r >= len(l.first) {
		return image.Rectangle{}
	}
	k := l.first[r] + c
	return l.gridRect(k/l.Grid.X, k%l.Grid.X)
}

// gridRect is the rectangle of the panel in row y and column x of the grid.
func (l *Layout) gridRect(y, x int) image.Rectangle {
	min := l.Origin.Add(image.Pt(x*(l.Panel.X+l.Gap.X), y*(l.Panel.Y+l.Gap.Y)))
	return image.Rectangle{Min: min, Max: min.Add(l.Panel)}
}

// HeatmapRect is the rectangle of the heatmap of layer r and head c.
func (l *Layout) HeatmapRect(r, c int) image.Rectangle {
	min := l.PanelRect(r, c).Min.Add(l.Heatmap)
	return image.Rectangle{Min: min, Max: min.Add(l.Cells.Mul(l.Cell))}
}

// CellRect is the square of the heatmap of layer r and head c that shows
// cell (i, j): query i and key j when Bin is 1. Cells of gridCell pixels or
// more leave a one-pixel line of background on their right and bottom, so
// that neighbouring cells of equal weight stay apart.
func (l *Layout) CellRect(r, c, i, j int) image.Rectangle {
	min := l.HeatmapRect(r, c).Min.Add(image.Pt(j*l.Cell, i*l.Cell))
	side := l.Cell
	if side >= gridCell {
		side--
	}
	return image.Rectangle{Min: min, Max: min.Add(image.Pt(side, side))}
}

// maxWidth is the widest of every step-th label.
func maxWidth(fc *faces, labels []string, step int) int {
	w := 0
	for i := 0; i < len(labels); i += step {
		w = max(w, width(fc.label, labels[i]))
	}
	return w
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}
