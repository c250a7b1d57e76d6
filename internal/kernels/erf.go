package kernels

import (
	"math"
	"sync"
)

// Erf32 sets dst[i] to erf(src[i]) rounded to float32, as float32(
// math.Erf(float64(x))) gives but several times faster: BERT's GELU
// (x/2·(1+erf(x/√2))) spent more time in math.Erf than in all its matrix
// products. Large slices are split across the processors. dst and src
// have the same length and may be the same slice.
//
// The float64 value it rounds is within 3e-12 of erf(x): a Taylor
// series near 0 (where erf(x) ≈ 2x/√π must keep its relative precision),
// cubic Hermite interpolation on a table of erf and its derivative
// 2/√π·e^(−x²) (both exact to float64) up to 4, and ±1 beyond, where
// erf(x) rounds to ±1 in float32. So it differs from float32(math.Erf(x))
// only when erf(x) lies within 3e-12 of a midpoint between two
// float32 values.
func Erf32(dst, src []float32) {
	if len(dst) != len(src) {
		panic("kernels: Erf32: dst and src lengths differ")
	}
	erfOnce.Do(buildErfTable)
	threads := maxThreads()
	if len(src) < 2*erfPart || threads == 1 {
		erfRange(dst, src)
		return
	}
	j := &erfJob{dst: dst, src: src, parts: ceilDiv(len(src), erfPart)}
	parallelFor(j.parts, threads, j)
}

// erfPart is the number of elements of one part of a parallel Erf32:
// about 25 µs of work with the vector code, well above the cost of waking
// a worker, and small enough that a sentence's GELU (32 tokens of BERT's
// 1536 hidden values) is split.
const erfPart = 1 << 13

// erfJob is a parallel Erf32, or GeluErf32 when gelu is set.
type erfJob struct {
	dst, src []float32
	parts    int
	gelu     bool
	c, a, s  float32
}

func (j *erfJob) runPart(part int) {
	lo := part * erfPart
	hi := min(lo+erfPart, len(j.src))
	if j.gelu {
		geluRange(j.dst[lo:hi], j.src[lo:hi], j.c, j.a, j.s)
		return
	}
	erfRange(j.dst[lo:hi], j.src[lo:hi])
}

const (
	erfStep    = 1.0 / 256 // the table's spacing
	erfLimit   = 4         // erf(x) rounds to 1 in float32 from here on
	erfSeries  = 0.125     // below this, the Taylor series
	erfEntries = erfLimit/erfStep + 1
)

var (
	erfOnce sync.Once
	// erfCubic holds, for each interval [i, i+1]·erfStep, the cubic in
	// t ∈ [0, 1] that interpolates erf and its derivative 2/√π·e^(−x²)
	// at both ends (Hermite), as power-basis coefficients c0..c3.
	erfCubic [erfEntries - 1][4]float64
	// erfTaylor are the Taylor coefficients of erf(x)/x in powers of x²:
	// 2/√π·(−1)ⁿ/(n!·(2n+1)).
	erfTaylor [7]float64
)

func buildErfTable() {
	at := func(i int) (y, d float64) {
		x := float64(i) * erfStep
		return math.Erf(x), 2 / math.SqrtPi * math.Exp(-x*x) * erfStep
	}
	for i := range erfCubic {
		y0, d0 := at(i)
		y1, d1 := at(i + 1)
		// p(t) = y0 + d0·t + (3(y1−y0) − 2d0 − d1)·t² + (2(y0−y1) + d0 + d1)·t³
		erfCubic[i] = [4]float64{y0, d0, 3*(y1-y0) - 2*d0 - d1, 2*(y0-y1) + d0 + d1}
	}
	fact := 1.0
	for n := range erfTaylor {
		if n > 0 {
			fact *= float64(n)
		}
		c := 2 / math.SqrtPi / (fact * float64(2*n+1))
		if n%2 == 1 {
			c = -c
		}
		erfTaylor[n] = c
	}
}

// erfRange is Erf32 on one goroutine.
func erfRange(dst, src []float32) {
	dst = dst[:len(src)]
	done := erfVector(dst, src)
	for i, v := range src[done:] {
		dst[done+i] = float32(erf64(float64(v)))
	}
}

// erf64 approximates erf(x) to 3e-12 (see Erf32).
func erf64(x float64) float64 {
	a := math.Abs(x)
	switch {
	case a < erfSeries:
		z := x * x
		s := erfTaylor[len(erfTaylor)-1]
		for n := len(erfTaylor) - 2; n >= 0; n-- {
			s = float64(s*z) + erfTaylor[n] // rounded apart, as the vector code does (no fused multiply-add)
		}
		return x * s
	case a < erfLimit:
	case a >= erfLimit:
		if x < 0 {
			return -1
		}
		return 1
	default: // NaN
		return x
	}
	u := a * (1 / erfStep)
	i := int(u)
	t := u - float64(i)
	c := &erfCubic[i]
	y := c[0] + float64(t*(c[1]+float64(t*(c[2]+float64(t*c[3])))))
	if x < 0 { // not math.Copysign: through the integer registers, it took 6 times the rest here
		return -y
	}
	return y
}

// GeluErf32 sets dst[i] to ((x·(erf(x/c) + a))·s) for x = src[i], with
// the float32 operations of the exported GELU's nodes in their order
// (Div, Erf, Add, Mul, Mul: c = √2, a = 1, s = 0.5 in BERT), so that it
// gives their bits in one pass; large slices are split across the
// processors. dst and src have the same length and may be the same
// slice.
func GeluErf32(dst, src []float32, c, a, s float32) {
	if len(dst) != len(src) {
		panic("kernels: GeluErf32: dst and src lengths differ")
	}
	erfOnce.Do(buildErfTable)
	threads := maxThreads()
	if len(src) < 2*erfPart || threads == 1 {
		geluRange(dst, src, c, a, s)
		return
	}
	j := &erfJob{dst: dst, src: src, parts: ceilDiv(len(src), erfPart), gelu: true, c: c, a: a, s: s}
	parallelFor(j.parts, threads, j)
}

// geluRange is GeluErf32 on one goroutine.
func geluRange(dst, src []float32, c, a, s float32) {
	dst = dst[:len(src)]
	done := geluVector(dst, src, c, a, s)
	for i, x := range src[done:] {
		i += done
		// Each conversion rounds, as each node does (and forbids fusing
		// a multiply and an add).
		e := float32(erf64(float64(float32(x / c))))
		m := float32(x * float32(e+a))
		dst[i] = float32(m * s)
	}
}
