package plot

import (
	"image"
	"image/color"
	"math"
	"strconv"
)

// tick is one labelled value on the colour bar.
type tick struct {
	value float64
	label string
}

// ticks chooses round values from 0 to vmax for the colour bar: steps of
// 1, 2, 2.5 or 5 times a power of ten, about five of them, and vmax itself
// at the top when it is not close to the last round value.
func ticks(vmax float64) []tick {
	raw := vmax / 5
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * pow
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*pow >= raw {
			step = m * pow
			break
		}
	}
	// Enough decimals to tell the steps apart: 0.25 needs two, 0.2 one.
	decimals := 0
	for s := step; math.Abs(s-math.Round(s)) > 1e-9 && decimals < 6; s *= 10 {
		decimals++
	}
	var out []tick
	n := int(math.Floor(vmax/step + 1e-9))
	for k := 0; k <= n; k++ {
		v := float64(k) * step
		out = append(out, tick{v, strconv.FormatFloat(v, 'f', decimals, 64)})
	}
	if last := out[len(out)-1].value; vmax-last > 0.6*step {
		out = append(out, tick{vmax, strconv.FormatFloat(vmax, 'f', decimals+1, 64)})
	}
	return out
}

// drawBar draws the colour bar, 0 at the bottom and vmax at the top, with
// its ticks and their values on the right.
func drawBar(c canvas, l *Layout, fc *faces, vmax float64) {
	bar := l.Bar
	h := bar.Dy()
	for y := bar.Min.Y; y < bar.Max.Y; y++ {
		t := float64(bar.Max.Y-1-y) / float64(max(h-1, 1))
		c.fill(image.Rect(bar.Min.X, y, bar.Max.X, y+1), Viridis(t))
	}
	outline(c, bar, axisColor)
	labelH := lineHeight(fc.label)
	for _, t := range ticks(vmax) {
		y := bar.Max.Y - 1 - int(math.Round(t.value/vmax*float64(h-1)))
		c.fill(image.Rect(bar.Max.X, y, bar.Max.X+tickLength, y+1), axisColor)
		c.text(fc.label, textColor, bar.Max.X+tickLength+labelPad, y-labelH/2, start, t.label)
	}
}

// outline draws a one-pixel frame just outside r.
func outline(c canvas, r image.Rectangle, col color.RGBA) {
	r = r.Inset(-1)
	for _, side := range []image.Rectangle{
		{r.Min, image.Pt(r.Max.X, r.Min.Y+1)},
		{image.Pt(r.Min.X, r.Max.Y-1), r.Max},
		{r.Min, image.Pt(r.Min.X+1, r.Max.Y)},
		{image.Pt(r.Max.X-1, r.Min.Y), r.Max},
	} {
		c.fill(side, col)
	}
}
