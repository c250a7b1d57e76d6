package plot

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"io"
	"strings"
)

// MaxSVGCells bounds the heatmap cells of an SVG figure, each a <rect> of
// about 60 bytes: beyond it the file would be too big for a browser or an
// editor to open comfortably, and a PNG serves better.
const MaxSVGCells = 1 << 20

// checkSVG refuses a figure whose SVG would draw more than MaxSVGCells cells.
func (f *Figure) checkSVG(l *Layout) error {
	panels := 0
	for _, row := range f.Rows {
		panels += len(row)
	}
	if cells := int64(panels) * int64(l.Cells.X) * int64(l.Cells.Y); cells > MaxSVGCells {
		return fmt.Errorf("plot: %w: the SVG would draw %d cells (%d panels of %d×%d), over the limit of %d (a PNG has no such limit)",
			ErrTooLarge, cells, panels, l.Cells.Y, l.Cells.X, MaxSVGCells)
	}
	return nil
}

// encodeSVG writes the figure as an SVG document of rectangles and text,
// with the same geometry as the raster picture: one user unit per pixel.
// Text names the Go fonts the raster uses, falling back to sans-serif.
func (f *Figure) encodeSVG(w io.Writer, l *Layout, fc *faces) error {
	if err := f.checkSVG(l); err != nil {
		return err
	}
	s := &svgCanvas{w: bufio.NewWriter(w)}
	fmt.Fprintf(s.w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" shape-rendering="crispEdges" font-family="Go, sans-serif">`+"\n",
		l.Size.X, l.Size.Y, l.Size.X, l.Size.Y)
	f.render(s, l, fc)
	fmt.Fprintln(s.w, "</svg>")
	return s.w.Flush()
}

// svgCanvas writes what is drawn on it as SVG elements.
// A bufio.Writer keeps the first error, which Flush reports.
type svgCanvas struct{ w *bufio.Writer }

func (s *svgCanvas) fill(r image.Rectangle, c color.RGBA) {
	if r.Empty() {
		return
	}
	fmt.Fprintf(s.w, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", r.Min.X, r.Min.Y, r.Dx(), r.Dy(), hex(c))
}

func (s *svgCanvas) text(st style, c color.RGBA, x, y int, a anchor, text string) {
	baseline := y + st.Metrics().Ascent.Ceil()
	fmt.Fprintf(s.w, `<text x="%d" y="%d"%s%s fill="%s">%s</text>`+"\n",
		x, baseline, st.attrs(), anchorAttr(a), hex(c), escape(text))
}

// textUp turns the text a quarter turn anticlockwise about its baseline's
// end: the glyphs' tops face left, so the baseline sits an ascent right of
// the line's left edge, as in the raster's drawTextUp.
func (s *svgCanvas) textUp(st style, c color.RGBA, x, y int, text string) {
	m := st.Metrics()
	h := (m.Ascent + m.Descent).Ceil()
	baseline := x - h/2 + m.Ascent.Ceil()
	fmt.Fprintf(s.w, `<text transform="translate(%d %d) rotate(-90)"%s text-anchor="end" fill="%s">%s</text>`+"\n",
		baseline, y, st.attrs(), hex(c), escape(text))
}

// escape makes text safe inside an XML element.
func escape(text string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(text)) // a strings.Builder never fails
	return b.String()
}

// attrs are the font attributes of a style.
func (st style) attrs() string {
	a := fmt.Sprintf(` font-size="%g"`, st.size)
	if st.bold {
		a += ` font-weight="bold"`
	}
	return a
}

func anchorAttr(a anchor) string {
	switch a {
	case middle:
		return ` text-anchor="middle"`
	case end:
		return ` text-anchor="end"`
	}
	return ""
}

func hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }
