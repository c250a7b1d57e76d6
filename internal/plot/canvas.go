package plot

import (
	"image"
	"image/color"
	"image/draw"
)

// canvas is what a figure is drawn on: a raster image or an SVG document.
// Both are addressed in pixels, with text placed by the top of its line.
type canvas interface {
	// fill paints rectangle r in colour c.
	fill(r image.Rectangle, c color.RGBA)
	// text writes s in style st, its line's top at y, and x at the start,
	// middle or end of the text as a says.
	text(st style, c color.RGBA, x, y int, a anchor, s string)
	// textUp writes s turned to read upwards, its end at the top edge y
	// and its line centred on x.
	textUp(st style, c color.RGBA, x, y int, s string)
}

// anchor is the point of a line of text its x coordinate gives.
type anchor int

const (
	start anchor = iota
	middle
	end
)

// raster draws on an image.
type raster struct{ img *image.RGBA }

func (r raster) fill(rect image.Rectangle, c color.RGBA) {
	draw.Draw(r.img, rect, image.NewUniform(c), image.Point{}, draw.Src)
}

func (r raster) text(st style, c color.RGBA, x, y int, a anchor, s string) {
	switch a {
	case middle:
		x -= width(st, s) / 2
	case end:
		x -= width(st, s)
	}
	drawText(r.img, st, c, x, y, s)
}

func (r raster) textUp(st style, c color.RGBA, x, y int, s string) {
	drawTextUp(r.img, st, c, x, y, s)
}
