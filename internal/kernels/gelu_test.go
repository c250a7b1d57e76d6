package kernels

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestErfVectorKeepsBits holds the vector erf and GELU to erf32 and the
// scalar GELU steps bit for bit: on a sweep of float32 values of both
// signs across every branch (x + x·Q(x²), each quarter's polynomial, ±1),
// subnormals, the quarter boundaries and their neighbours, the special
// values in every lane position, and lengths that leave a tail for the
// scalar code or an odd vector after the pairs.
func TestErfVectorKeepsBits(t *testing.T) {
	erfOnce.Do(buildErfTable)
	var xs []float32
	for x := float32(math.SmallestNonzeroFloat32); x < 8; x = math.Nextafter32(x, 10) * 1.0003 {
		xs = append(xs, x, -x)
	}
	for q := float32(0.25); q <= 2*erfLimit; q += 0.25 {
		xs = append(xs, q, -q, math.Nextafter32(q, 0), -math.Nextafter32(q, 0), math.Nextafter32(q, 10))
	}
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.MaxFloat32, -math.SmallestNonzeroFloat32, 0x1p-126, -0x1p-127}
	for lane := range 16 {
		xs = append(xs, xs[:lane]...)
		xs = append(xs, specials...)
	}
	c, a, s := float32(math.Sqrt2), float32(1), float32(0.5)
	for _, n := range []int{len(xs), len(xs) - 5, 15, 29, 55} {
		src := xs[:n]
		got := make([]float32, n)
		erfRange(got, src)
		gelu := make([]float32, n)
		geluRange(gelu, src, c, a, s)
		for i, x := range src {
			want := erf32(x)
			require.Equal(t, math.Float32bits(want), math.Float32bits(got[i]), "erf(%g) at %d of %d: %g, want %g", x, i, n, got[i], want)
			e := erf32(float32(x / c))
			wantGelu := float32(float32(x*float32(e+a)) * s)
			require.Equal(t, math.Float32bits(wantGelu), math.Float32bits(gelu[i]), "gelu(%g) at %d of %d: %g, want %g", x, i, n, gelu[i], wantGelu)
		}
	}
	t.Logf("%d values; vector code: %v", len(xs), erfVector(make([]float32, 16), xs[:16]) == 16)
}
