package plot

import (
	"fmt"
	"image"
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
	minCell     = 4   // and for long ones, where labels thin out
	heatmapSide = 520 // long inputs shrink cells to about this side
	valueCell   = 34  // cells at least this big show their weight as text
	gridCell    = 16  // and at least this big are set apart by a thin line
	// MaxPixels bounds the image a figure may need (4 bytes each), so that
	// a long input or a deep model gives an error instead of exhausting memory.
	MaxPixels = 25_000_000
)

// Layout places every part of a figure. The image is Size; panel (r, c)
// sits at Origin + (c·(Panel.X+Gap.X), r·(Panel.Y+Gap.Y)); inside it, the
// heatmap starts at Heatmap and is Cols·Cell × Rows·Cell, cell (i, j) being
// query i and key j. Token labels are drawn every LabelStep cells.
type Layout struct {
	Size    image.Point // the whole image
	Grid    image.Point // panels across (heads) and down (layers)
	Origin  image.Point // top-left corner of panel (0, 0)
	Panel   image.Point // size of one panel: title, query labels, heatmap, key labels
	Gap     image.Point // space between neighbouring panels
	Heatmap image.Point // top-left corner of the heatmap within its panel
	Cell    int         // side of one heatmap cell
	Tokens  image.Point // key count (X) and query count (Y)
	Bar     image.Rectangle

	// QueryStep and KeyStep thin out the labels of long inputs: every
	// QueryStep-th query and KeyStep-th key is labelled.
	QueryStep, KeyStep int
	// KeysUp turns the key labels to read upwards when they do not fit
	// side by side under their cells.
	KeysUp bool
	// Values is set when cells are big enough to print their weight.
	Values bool
}

// layout computes the figure's layout with the text measured in fc.
func (f *Figure) layout(fc *faces) (*Layout, error) {
	l := &Layout{Tokens: image.Pt(len(f.Keys), len(f.Queries)), Gap: image.Pt(panelGapX, panelGapY)}
	for _, row := range f.Rows {
		l.Grid.X = max(l.Grid.X, len(row))
	}
	l.Grid.Y = len(f.Rows)

	// Cells are as big as the heatmap's side allows, up to maxCell, and a
	// little bigger still when that lets the key labels stand upright.
	keyW := maxWidth(fc, f.Keys, 1)
	fit := heatmapSide / max(l.Tokens.X, l.Tokens.Y)
	l.Cell = max(minCell, min(maxCell, fit))
	if l.Cell == maxCell {
		l.Cell = max(l.Cell, min(keyW+keyGap, wideCell, fit))
	}
	l.Values = l.Cell >= valueCell

	labelH := lineHeight(fc.label)
	l.QueryStep = ceilDiv(labelH, l.Cell)
	queryW := maxWidth(fc, f.Queries, l.QueryStep)
	l.KeyStep = 1
	keyBand := labelH
	if keyW+keyGap > l.Cell {
		l.KeysUp = true
		l.KeyStep = ceilDiv(labelH, l.Cell)
		keyBand = maxWidth(fc, f.Keys, l.KeyStep)
	}

	titleW := 0
	for _, row := range f.Rows {
		for _, h := range row {
			titleW = max(titleW, width(fc.panelTitle, h.Title))
		}
	}
	heatW, heatH := l.Tokens.X*l.Cell, l.Tokens.Y*l.Cell
	gutter := queryW + labelPad
	l.Heatmap = image.Pt(gutter, lineHeight(fc.panelTitle)+titleGap)
	l.Panel = image.Pt(gutter+max(heatW, titleW), l.Heatmap.Y+heatH+labelPad+keyBand)

	top := margin
	headW := 0
	if f.Title != "" {
		top += lineHeight(fc.figureTitle) + titleGap
		headW = width(fc.figureTitle, f.Title)
	}
	if f.Subtitle != "" {
		top += labelH + titleGap
		headW = max(headW, width(fc.label, f.Subtitle))
	}
	l.Origin = image.Pt(margin, top)

	gridW := l.Grid.X*l.Panel.X + (l.Grid.X-1)*l.Gap.X
	gridH := l.Grid.Y*l.Panel.Y + (l.Grid.Y-1)*l.Gap.Y
	barX := l.Origin.X + gridW + barGap
	barTop := l.Origin.Y + l.Heatmap.Y
	barBottom := l.Origin.Y + (l.Grid.Y-1)*(l.Panel.Y+l.Gap.Y) + l.Heatmap.Y + heatH
	l.Bar = image.Rect(barX, barTop, barX+barWidth, barBottom)

	tickW := 0
	for _, t := range ticks(f.max()) {
		tickW = max(tickW, width(fc.label, t.label))
	}
	l.Size.X = max(l.Bar.Max.X+tickLength+labelPad+tickW, margin+headW) + margin
	l.Size.Y = l.Origin.Y + gridH + margin
	if px := int64(l.Size.X) * int64(l.Size.Y); px > MaxPixels {
		return nil, fmt.Errorf("plot: the figure would be %d×%d pixels, over the limit of %d; plot fewer panels or fewer tokens",
			l.Size.X, l.Size.Y, MaxPixels)
	}
	return l, nil
}

// PanelRect is the rectangle of panel (r, c): layer r, head c.
func (l *Layout) PanelRect(r, c int) image.Rectangle {
	min := l.Origin.Add(image.Pt(c*(l.Panel.X+l.Gap.X), r*(l.Panel.Y+l.Gap.Y)))
	return image.Rectangle{Min: min, Max: min.Add(l.Panel)}
}

// HeatmapRect is the rectangle of panel (r, c)'s heatmap.
func (l *Layout) HeatmapRect(r, c int) image.Rectangle {
	min := l.PanelRect(r, c).Min.Add(l.Heatmap)
	return image.Rectangle{Min: min, Max: min.Add(image.Pt(l.Tokens.X*l.Cell, l.Tokens.Y*l.Cell))}
}

// CellRect is the square of panel (r, c) that shows the weight of query i
// on key j. Cells of gridCell pixels or more leave a one-pixel line of background on their right
// and bottom, so that neighbouring cells of equal weight stay apart.
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
