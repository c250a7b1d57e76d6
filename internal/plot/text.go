package plot

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// Text sizes in pixels (72 DPI, so points are pixels).
const (
	figureTitleSize = 17
	panelTitleSize  = 14
	labelSize       = 13
	valueSize       = 11
)

// faces holds the text styles of one drawing. Faces cache glyphs and are
// not safe for concurrent use, so every drawing makes its own.
type faces struct {
	figureTitle, panelTitle, label, value style
}

// style is a font face with what an SVG needs to name it.
type style struct {
	font.Face
	size float64
	bold bool
}

// The Go fonts, parsed once: they are embedded in the binary by
// golang.org/x/image/font/gofont and cannot fail to parse.
var (
	parseOnce       sync.Once
	regular, bold   *opentype.Font
	errParseGoFonts error
)

func newFaces() (*faces, error) {
	parseOnce.Do(func() {
		if regular, errParseGoFonts = opentype.Parse(goregular.TTF); errParseGoFonts != nil {
			return
		}
		bold, errParseGoFonts = opentype.Parse(gobold.TTF)
	})
	if errParseGoFonts != nil {
		return nil, fmt.Errorf("plot: Go fonts: %w", errParseGoFonts)
	}
	f := &faces{}
	for _, spec := range []struct {
		dst  *style
		bold bool
		size float64
	}{
		{&f.figureTitle, true, figureTitleSize},
		{&f.panelTitle, true, panelTitleSize},
		{&f.label, false, labelSize},
		{&f.value, false, valueSize},
	} {
		ttf := regular
		if spec.bold {
			ttf = bold
		}
		face, err := opentype.NewFace(ttf, &opentype.FaceOptions{Size: spec.size, DPI: 72, Hinting: font.HintingFull})
		if err != nil {
			return nil, fmt.Errorf("plot: font face: %w", err)
		}
		*spec.dst = style{face, spec.size, spec.bold}
	}
	return f, nil
}

// width is the advance of s in face, in whole pixels.
func width(face font.Face, s string) int { return font.MeasureString(face, s).Ceil() }

// lineHeight is the height of one line of text in face: ascent plus descent.
func lineHeight(face font.Face) int {
	m := face.Metrics()
	return (m.Ascent + m.Descent).Ceil()
}

// drawText draws s with its top-left corner at (x, y).
func drawText(dst draw.Image, face font.Face, c color.Color, x, y int, s string) {
	d := font.Drawer{
		Dst:  dst,
		Src:  image.NewUniform(c),
		Face: face,
		Dot:  fixed.P(x, y+face.Metrics().Ascent.Ceil()),
	}
	d.DrawString(s)
}

// drawTextUp draws s rotated a quarter turn anticlockwise, reading from
// bottom to top, with the end of the text at the top edge y and the line's
// vertical centre on x. The text is drawn flat into a mask first, then the
// mask is turned: font rasterizers draw only horizontal text.
func drawTextUp(dst draw.Image, face font.Face, c color.Color, x, y int, s string) {
	w, h := width(face, s), lineHeight(face)
	if w == 0 {
		return
	}
	flat := image.NewAlpha(image.Rect(0, 0, w, h))
	drawText(flat, face, color.Opaque, 0, 0, s)
	turned := image.NewAlpha(image.Rect(0, 0, h, w))
	for fy := 0; fy < h; fy++ {
		for fx := 0; fx < w; fx++ {
			turned.SetAlpha(fy, w-1-fx, flat.AlphaAt(fx, fy))
		}
	}
	r := image.Rect(x-h/2, y, x-h/2+h, y+w)
	draw.DrawMask(dst, r, image.NewUniform(c), image.Point{}, turned, image.Point{}, draw.Over)
}
