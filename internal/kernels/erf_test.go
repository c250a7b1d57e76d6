package kernels

import (
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// erfAccuracy is how far Erf32 strays from math.Erf on a set of values.
type erfAccuracy struct {
	values  int
	differ  int     // results other than float32(math.Erf(x))
	maxUlps int64   // ... by at most this many float32 steps
	maxAbs  float64 // |Erf32(x) − math.Erf(x)|
	worst   float32 // an x at maxUlps
}

// add measures Erf32's results got for xs.
func (e *erfAccuracy) add(xs, got []float32) {
	for i, x := range xs {
		e.values++
		want := float32(math.Erf(float64(x)))
		if want != want {
			if got[i] == got[i] {
				e.maxUlps = math.MaxInt64 // NaN wanted, a number found
				e.worst = x
			}
			continue
		}
		if got[i] == want && math.Signbit(float64(got[i])) == math.Signbit(float64(want)) {
			continue
		}
		e.differ++
		if d := ulpsApart(got[i], want); d > e.maxUlps {
			e.maxUlps, e.worst = d, x
		}
		e.maxAbs = max(e.maxAbs, math.Abs(float64(got[i])-math.Erf(float64(x))))
	}
}

// ulpsApart counts the float32 values from a to b (±0 count as two
// values, so a lost sign is one step); NaN is infinitely far.
func ulpsApart(a, b float32) int64 {
	if a != a || b != b {
		return math.MaxInt64
	}
	ordered := func(f float32) int64 {
		bits := int64(math.Float32bits(f) &^ (1 << 31))
		if math.Signbit(float64(f)) {
			return -bits - 1
		}
		return bits
	}
	d := ordered(a) - ordered(b)
	return max(d, -d)
}

// TestErf32 holds Erf32 to float32(math.Erf(x)) within one ulp and to
// math.Erf(x) within 5e-8: on float32 values sampled every few hundred
// bit patterns over [−0.01, 0.01] (where erf(x) ≈ 2x/√π must keep its
// relative precision, subnormals included), 2.4 million evenly spaced
// values over [−6, 6] (every polynomial piece and the ±1 tails), the
// piece boundaries, and ±0, ±Inf, NaN, the largest float32.
func TestErf32(t *testing.T) {
	var xs []float32
	for b := uint32(0); b <= math.Float32bits(0.01); b += 997 {
		x := math.Float32frombits(b)
		xs = append(xs, x, -x)
	}
	for i := range 2_400_001 {
		xs = append(xs, float32(-6+12*float64(i)/2_400_000))
	}
	for q := float32(0); q <= erfLimit; q += 0.25 {
		xs = append(xs, q, -q, math.Nextafter32(q, 0), math.Nextafter32(-q, 0), math.Nextafter32(q, 10))
	}
	xs = append(xs, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32)
	got := make([]float32, len(xs))
	Erf32(got, xs)
	var acc erfAccuracy
	acc.add(xs, got)
	assert.LessOrEqual(t, acc.maxUlps, int64(1), "ulps from float32(math.Erf), at x = %g", acc.worst)
	assert.Less(t, acc.maxAbs, 5e-8, "absolute error")
	assert.Less(t, acc.differ, acc.values/20, "results other than float32(math.Erf)")
	t.Logf("%d values: %d one ulp from float32(math.Erf) (at most %d ulp), absolute error at most %.3g",
		acc.values, acc.differ, acc.maxUlps, acc.maxAbs)
}

// TestErf32Exhaustive runs Erf32 on every float32 bit pattern, holds it to
// the bounds of TestErf32 and the Go code to the vector code bit for bit,
// and logs how many results differ from float32(math.Erf) below erfOdd,
// up to erfLimit, and from there on. It takes a few minutes, so it runs
// only with ATTNRUN_ERF_EXHAUSTIVE=1.
func TestErf32Exhaustive(t *testing.T) {
	if os.Getenv("ATTNRUN_ERF_EXHAUSTIVE") != "1" {
		t.Skip("set ATTNRUN_ERF_EXHAUSTIVE=1 to check all 2³² float32 values")
	}
	erfOnce.Do(buildErfTable)
	// A chunk's values lie on one side of erfOdd and erfLimit: their bit
	// patterns are multiples of the chunk size.
	const chunk = 1 << 16
	xs, got := make([]float32, chunk), make([]float32, chunk)
	var ranges [3]erfAccuracy
	for start := uint64(0); start < 1<<32; start += chunk {
		for i := range xs {
			xs[i] = math.Float32frombits(uint32(start) + uint32(i))
		}
		erfRange(got, xs)
		for i, x := range xs {
			if e := erf32(x); math.Float32bits(e) != math.Float32bits(got[i]) {
				require.Failf(t, "the Go code and the vector code differ", "erf(%g): %g and %g", x, e, got[i])
			}
		}
		a := math.Abs(float64(xs[0]))
		switch {
		case a < erfOdd:
			ranges[0].add(xs, got)
		case a < erfLimit:
			ranges[1].add(xs, got)
		default:
			ranges[2].add(xs, got)
		}
	}
	for i, name := range []string{"below ½", "from ½ to 4", "from 4 on"} {
		acc := ranges[i]
		assert.LessOrEqual(t, acc.maxUlps, int64(1), "ulps from float32(math.Erf), at x = %g", acc.worst)
		assert.Less(t, acc.maxAbs, 5e-8, "absolute error")
		t.Logf("%s: %d values, %d (%.2f%%) one ulp from float32(math.Erf) (at most %d ulp, at x = %g), absolute error at most %.3g",
			name, acc.values, acc.differ, 100*float64(acc.differ)/float64(acc.values), acc.maxUlps, acc.worst, acc.maxAbs)
	}
}

// BenchmarkErf32 times Erf32 on a million values (split across the
// processors with -cpu 2), the vector code on one goroutine, the Go
// code one value at a time, and float32(math.Erf).
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
	b.Run("one goroutine", func(b *testing.B) {
		for range b.N {
			erfRange(dst, xs)
		}
	})
	b.Run("scalar", func(b *testing.B) {
		for range b.N {
			for i, x := range xs {
				dst[i] = erf32(x)
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

// geluNodes is the exported GELU's nodes run one by one in float32 with
// erf as the function given.
func geluNodes(x, c, a, s float32, erf func(float32) float32) float32 {
	d := x / c
	e := erf(d)
	sum := e + a
	m := x * sum
	return m * s
}

// TestGeluErf32 holds GeluErf32 to the exported GELU's nodes computed one
// by one in float32 (Div, Erf as Erf32, Add, Mul, Mul) bit for bit, on a
// slice long enough to be split across threads; and to the same nodes
// with float32(math.Erf) within what Erf32's one ulp can move them.
func TestGeluErf32(t *testing.T) {
	xs := make([]float32, 3*erfPart+17)
	for i := range xs {
		xs[i] = float32(i%4001)/500 - 4 + float32(i%7)*1e-4
	}
	xs[5] = float32(math.NaN())
	c, a, s := float32(math.Sqrt2), float32(1), float32(0.5)
	got := make([]float32, len(xs))
	GeluErf32(got, xs, c, a, s)
	mathErf := func(x float32) float32 { return float32(math.Erf(float64(x))) }
	for i, x := range xs {
		want := geluNodes(x, c, a, s, erf32)
		require.Equal(t, math.Float32bits(want), math.Float32bits(got[i]), "gelu(%g) = %g, want %g", x, got[i], want)
		if x != x {
			continue
		}
		// One ulp of erf, at most 2⁻²⁴ below 1, moves the sum by up to
		// 2⁻²³ once rounded; each later node rounds once more.
		ref := geluNodes(x, c, a, s, mathErf)
		tol := math.Abs(float64(x*s))*0x1p-23 + 2*ulp32(ref)
		require.InDelta(t, ref, got[i], tol, "gelu(%g) with math.Erf's erf", x)
	}
}

// ulp32 is the gap from |f| to the next float32 up.
func ulp32(f float32) float64 {
	f = float32(math.Abs(float64(f)))
	return float64(math.Nextafter32(f, float32(math.Inf(1))) - f)
}

// BenchmarkGeluErf32 times GeluErf32 on a sentence's GELU (32 tokens of
// 1536 values, split across the processors with -cpu 2) and the vector
// code on a million values on one goroutine.
func BenchmarkGeluErf32(b *testing.B) {
	xs := make([]float32, 1<<20)
	for i := range xs {
		xs[i] = float32(i%2000)/250 - 4
	}
	dst := make([]float32, len(xs))
	b.Run("sentence", func(b *testing.B) {
		for range b.N {
			GeluErf32(dst[:32*1536], xs[:32*1536], math.Sqrt2, 1, 0.5)
		}
	})
	b.Run("one goroutine", func(b *testing.B) {
		for range b.N {
			geluRange(dst, xs, math.Sqrt2, 1, 0.5)
		}
	})
}
