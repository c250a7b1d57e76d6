package plot

import (
	"image/color"
	"math"
)

// viridis is matplotlib's viridis colormap sampled at eleven evenly spaced
// points (0, 0.1, ..., 1). Viridis is perceptually uniform: equal steps in
// weight look like equal steps in colour, and it stays readable in grey and
// for colour-blind readers. Linear interpolation between these stops is
// within a few levels of the full 256-entry table.
var viridis = [...]color.RGBA{
	{0x44, 0x01, 0x54, 0xff},
	{0x48, 0x24, 0x75, 0xff},
	{0x41, 0x44, 0x87, 0xff},
	{0x35, 0x5f, 0x8d, 0xff},
	{0x2a, 0x78, 0x8e, 0xff},
	{0x21, 0x91, 0x8c, 0xff},
	{0x22, 0xa8, 0x84, 0xff},
	{0x44, 0xbf, 0x70, 0xff},
	{0x7a, 0xd1, 0x51, 0xff},
	{0xbd, 0xdf, 0x26, 0xff},
	{0xfd, 0xe7, 0x25, 0xff},
}

// Viridis returns the colour of t on the viridis scale, t in [0, 1]: dark
// purple at 0, yellow at 1. Values outside are clamped; NaN maps to 0.
func Viridis(t float64) color.RGBA {
	if !(t > 0) { // also NaN
		return viridis[0]
	}
	if t >= 1 {
		return viridis[len(viridis)-1]
	}
	pos := t * float64(len(viridis)-1)
	i := int(pos)
	frac := pos - float64(i)
	a, b := viridis[i], viridis[i+1]
	mix := func(x, y uint8) uint8 {
		return uint8(math.Round(float64(x) + frac*(float64(y)-float64(x))))
	}
	return color.RGBA{mix(a.R, b.R), mix(a.G, b.G), mix(a.B, b.B), 0xff}
}

// isDark reports whether text on c should be light: the colour's relative
// luminance (Rec. 709 weights on the sRGB values, close enough for picking
// black or white) is below one half.
func isDark(c color.RGBA) bool {
	l := 0.2126*float64(c.R) + 0.7152*float64(c.G) + 0.0722*float64(c.B)
	return l < 128
}
