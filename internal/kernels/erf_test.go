package kernels

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestErf32 holds Erf32 to float32(math.Erf(x)) over a dense sweep of
// float32 values from 0 to past 4 and both signs, tiny values included,
// and the special values: at most one float32 ulp apart (the rounding of a
// value within 1e-12 of a midpoint), and bit for bit in nearly all cases.
// Below 4, its float64 approximation stays within 1e-14 of math.Erf.
func TestErf32(t *testing.T) {
	var xs []float32
	for x := float32(1e-30); x < 5; x = math.Nextafter32(x, 10) * 1.0001 {
		xs = append(xs, x, -x)
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), 4, -4, 3.999999, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()))
	require.Greater(t, len(xs), 1000000)
	got := make([]float32, len(xs))
	Erf32(got, xs)
	differ := 0
	for i, x := range xs {
		want := float32(math.Erf(float64(x)))
		if want != want {
			assert.True(t, got[i] != got[i], "erf(%g) = %g, want NaN", x, got[i])
			continue
		}
		if got[i] != want {
			differ++
			assert.LessOrEqual(t, math.Abs(float64(got[i]-want)), float64(math.Nextafter32(float32(math.Abs(float64(want))), 2)-float32(math.Abs(float64(want)))),
				"erf(%g) = %g, want %g", x, got[i], want)
		}
		if math.Abs(float64(x)) < erfLimit {
			assert.InDelta(t, math.Erf(float64(x)), erf64(float64(x)), 1e-14, "erf64(%g)", x)
		}
		assert.Equal(t, math.Signbit(float64(want)), math.Signbit(float64(got[i])), "sign of erf(%g)", x)
	}
	assert.Less(t, differ, len(xs)/10000, "values that round differently")
	t.Logf("%d values, %d rounded one ulp apart", len(xs), differ)
}

// BenchmarkErf32 times Erf32 against erf64 one value at a time and
// float32(math.Erf) on a GELU's worth of inputs.
func BenchmarkErf32(b *testing.B) {
	xs := make([]float32, 1<<20)
	for i := range xs {
		xs[i] = float32(i%2000)/250 - 4
	}
	dst := make([]float32, len(xs))
	b.Run("Erf32", func(b *testing.B) {
		for range b.N {
			Erf32(dst, xs)
		}
	})
	b.Run("scalar", func(b *testing.B) {
		for range b.N {
			for i, x := range xs {
				dst[i] = float32(erf64(float64(x)))
			}
		}
	})
	b.Run("math.Erf", func(b *testing.B) {
		for range b.N {
			for i, x := range xs {
				dst[i] = float32(math.Erf(float64(x)))
			}
		}
	})
}

// TestGeluErf32 holds GeluErf32 to the exported GELU's nodes computed one
// by one in float32 (Div, Erf as float32(math.Erf), Add, Mul, Mul), bit
// for bit, on a slice long enough to be split across threads.
func TestGeluErf32(t *testing.T) {
	xs := make([]float32, 3*erfPart+17)
	for i := range xs {
		xs[i] = float32(i%4001)/500 - 4 + float32(i%7)*1e-4
	}
	xs[5] = float32(math.NaN())
	c, a, s := float32(math.Sqrt2), float32(1), float32(0.5)
	got := make([]float32, len(xs))
	GeluErf32(got, xs, c, a, s)
	for i, x := range xs {
		d := x / c
		e := float32(math.Erf(float64(d)))
		sum := e + a
		m := x * sum
		want := m * s
		if want != want {
			require.True(t, got[i] != got[i], "gelu(%g) = %g, want NaN", x, got[i])
			continue
		}
		require.Equal(t, want, got[i], "gelu(%g)", x)
	}
}

// BenchmarkGeluErf32 times GeluErf32 on one goroutine (run with -cpu 1)
// on a sentence's GELU: 32 tokens of 1536 values.
func BenchmarkGeluErf32(b *testing.B) {
	xs := make([]float32, 32*1536)
	for i := range xs {
		xs[i] = float32(i%2000)/250 - 4
	}
	dst := make([]float32, len(xs))
	for range b.N {
		GeluErf32(dst, xs, math.Sqrt2, 1, 0.5)
	}
}
