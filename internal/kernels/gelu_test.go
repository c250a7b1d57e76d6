package kernels

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestErfVectorKeepsBits holds the vector erf and GELU to erf64 and the
// scalar GELU steps bit for bit: on a sweep of float32 values of both
// signs across every branch (series, each polynomial piece, ±1), the branch boundaries,
// the special values in every lane position, and lengths that leave a
// tail for the scalar code.
func TestErfVectorKeepsBits(t *testing.T) {
	erfOnce.Do(buildErfTable)
	var xs []float32
	for x := float32(1e-30); x < 8; x = math.Nextafter32(x, 10) * 1.0003 {
		xs = append(xs, x, -x)
	}
	for _, b := range []float32{erfSeries, erfLimit, 0.5, 1, 1.5, 2, 2.5, 3, 3.5} {
		xs = append(xs, b, -b, math.Nextafter32(b, 0), -math.Nextafter32(b, 0), math.Nextafter32(b, 10))
	}
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, -math.SmallestNonzeroFloat32}
	for lane := range 8 {
		xs = append(xs, xs[:lane]...)
		xs = append(xs, specials...)
	}
	c, a, s := float32(math.Sqrt2), float32(1), float32(0.5)
	for _, n := range []int{len(xs), len(xs) - 3, 7, 13} {
		src := xs[:n]
		got := make([]float32, n)
		erfRange(got, src)
		gelu := make([]float32, n)
		geluRange(gelu, src, c, a, s)
		for i, x := range src {
			want := float32(erf64(float64(x)))
			require.Equal(t, math.Float32bits(want), math.Float32bits(got[i]), "erf(%g) at %d of %d: %g, want %g", x, i, n, got[i], want)
			e := float32(erf64(float64(float32(x / c))))
			wantGelu := float32(float32(x*float32(e+a)) * s)
			require.Equal(t, math.Float32bits(wantGelu), math.Float32bits(gelu[i]), "gelu(%g) at %d of %d: %g, want %g", x, i, n, gelu[i], wantGelu)
		}
	}
	t.Logf("%d values; vector code: %v", len(xs), erfVector(make([]float32, 8), xs[:8]) == 8)
}
