package layers

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// everyTwoTables writes GPT-J's cos and sin tables for T positions of d
// rotated features: the angle of pair i, t·base^(−2i/d), repeated for its
// two features (repeat_interleave), as float32 holds them.
func everyTwoTables(base float64, T, d int) (cos, sin []float64) {
	for t := range T {
		for i := range d {
			angle := float64(t) * math.Pow(base, -2*float64(i/2)/float64(d))
			cos = append(cos, float64(float32(math.Cos(angle))))
			sin = append(sin, float64(float32(math.Sin(angle))))
		}
	}
	return cos, sin
}

// TestEveryTwoAngleBase reads the base back from interleaved tables of
// several bases and widths; one pair leaves it at 10000 (any base turns
// pair 0 by its position), and one position is too few to read it.
func TestEveryTwoAngleBase(t *testing.T) {
	for _, tc := range []struct {
		base float64
		T, d int
	}{{10000, 3, 4}, {500, 5, 8}, {1e6, 4, 16}} {
		cos, sin := everyTwoTables(tc.base, tc.T, tc.d)
		got, err := everyTwoAngleBase(cos, sin, tc.T, tc.d)
		require.NoError(t, err)
		assert.InDelta(t, tc.base, got, 1e-3*tc.base, "T=%d d=%d", tc.T, tc.d)
	}
	cos, sin := everyTwoTables(500, 3, 2)
	got, err := everyTwoAngleBase(cos, sin, 3, 2)
	require.NoError(t, err)
	assert.Equal(t, 10000.0, got)
	cos, sin = everyTwoTables(500, 1, 4)
	_, err = everyTwoAngleBase(cos, sin, 1, 4)
	assert.ErrorContains(t, err, "1 position(s)")
}
