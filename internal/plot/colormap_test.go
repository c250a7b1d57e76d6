package plot

import (
	"image/color"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestViridis(t *testing.T) {
	for _, tc := range []struct {
		t    float64
		want color.RGBA
	}{
		{0, color.RGBA{0x44, 0x01, 0x54, 0xff}},    // matplotlib's viridis(0.0)
		{0.5, color.RGBA{0x21, 0x91, 0x8c, 0xff}},  // viridis(0.5)
		{1, color.RGBA{0xfd, 0xe7, 0x25, 0xff}},    // viridis(1.0)
		{0.05, color.RGBA{0x46, 0x13, 0x65, 0xff}}, // halfway between the first two stops
		{-3, color.RGBA{0x44, 0x01, 0x54, 0xff}},
		{7, color.RGBA{0xfd, 0xe7, 0x25, 0xff}},
		{math.NaN(), color.RGBA{0x44, 0x01, 0x54, 0xff}},
	} {
		assert.Equal(t, tc.want, Viridis(tc.t), "Viridis(%g)", tc.t)
	}
}

// TestViridisGetsLighter checks the property that makes the scale readable:
// a larger weight is always a lighter colour.
func TestViridisGetsLighter(t *testing.T) {
	luminance := func(c color.RGBA) float64 {
		return 0.2126*float64(c.R) + 0.7152*float64(c.G) + 0.0722*float64(c.B)
	}
	prev := -1.0
	for i := 0; i <= 100; i++ {
		l := luminance(Viridis(float64(i) / 100))
		assert.Greater(t, l, prev, "at %d%%", i)
		prev = l
	}
	assert.True(t, isDark(Viridis(0)))
	assert.False(t, isDark(Viridis(1)))
}
