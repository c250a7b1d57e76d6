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
// The float64 value it rounds is within 1e-14 of erf(x): a Taylor
// series near 0 (where erf(x) ≈ 2x/√π must keep its relative precision),
// eight polynomials of degree 11 up to 4 (Chebyshev interpolation of
// math.Erf on pieces 0.5 wide, evaluated with fused multiply-adds), and
// ±1 beyond, where erf(x) rounds to ±1 in float32. So it differs from
// float32(math.Erf(x)) only when erf(x) lies within 1e-14 of a midpoint
// between two float32 values. With AVX-512 eight values are computed at
// a time, with the same operations (gelu_avx512_amd64.s).
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
	j := erfJobs.Get().(*erfJob)
	*j = erfJob{dst: dst, src: src, parts: ceilDiv(len(src), erfPart)}
	parallelFor(j.parts, threads, j)
	*j = erfJob{} // let go of the slices
	erfJobs.Put(j)
}

// erfPart is the number of elements of one part of a parallel Erf32:
// about 25 µs of work with the vector code, well above the cost of waking
// a worker, and small enough that a sentence's GELU (32 tokens of BERT's
// 1536 hidden values) is split.
const erfPart = 1 << 13

// erfJobs recycles erfJob values: a job handed to parallelFor lives on the
// heap, and a BERT pass makes one per layer.
var erfJobs = sync.Pool{New: func() any { return new(erfJob) }}

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
	erfLimit  = 4     // erf(x) rounds to 1 in float32 from here on
	erfSeries = 0.125 // below this, the Taylor series
	erfPieces = 8     // polynomial pieces on [0, erfLimit), 0.5 wide
	erfDegree = 11    // their degree
)

var (
	erfOnce sync.Once
	// erfPoly[k][i] is the coefficient of tᵏ in the polynomial of piece i,
	// which approximates erf(x) for |x| in [i, i+1)/2 with t = 2|x| − i −
	// ½ ∈ [−½, ½): erf interpolated at the 12 Chebyshev points of the
	// piece, within 1e-15 of it. Stored power by power, so that the vector
	// code takes each power's eight coefficients with one permutation
	// instead of gathering them.
	erfPoly [erfDegree + 1][erfPieces]float64
	// erfTaylor are the Taylor coefficients of erf(x)/x in powers of x²:
	// 2/√π·(−1)ⁿ/(n!·(2n+1)).
	erfTaylor [7]float64
)

func buildErfTable() {
	const n = erfDegree + 1
	for i := range erfPieces {
		// Chebyshev coefficients of erf on the piece, s = 2t ∈ [−1, 1].
		var f, a [n]float64
		for j := range f {
			s := math.Cos(math.Pi * (float64(j) + 0.5) / n)
			f[j] = math.Erf((float64(i) + 0.5 + s/2) / 2)
		}
		for k := range a {
			for j, v := range f {
				a[k] += v * math.Cos(math.Pi*float64(k)*(float64(j)+0.5)/n)
			}
			a[k] *= 2.0 / n
		}
		a[0] /= 2
		// Σ a_k·T_k(s) in powers of s (T_{k+1} = 2s·T_k − T_{k−1}), then
		// of t = s/2.
		var p, prev, cur [n]float64
		prev[0], cur[1] = 1, 1
		p[0], p[1] = a[0], a[1]
		for k := 2; k < n; k++ {
			var next [n]float64
			for m := range next {
				if m > 0 {
					next[m] = 2 * cur[m-1]
				}
				next[m] -= prev[m]
				p[m] += a[k] * next[m]
			}
			prev, cur = cur, next
		}
		for m := range p {
			erfPoly[m][i] = math.Ldexp(p[m], m)
		}
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

// erf64 approximates erf(x) to 1e-14 (see Erf32).
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
	u := a * (erfPieces / erfLimit)
	i := int(u)
	t := u - float64(i) - 0.5
	y := erfPoly[erfDegree][i]
	for k := erfDegree - 1; k >= 0; k-- {
		y = math.FMA(y, t, erfPoly[k][i]) // fused, as the vector code's
	}
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
	j := erfJobs.Get().(*erfJob)
	*j = erfJob{dst: dst, src: src, parts: ceilDiv(len(src), erfPart), gelu: true, c: c, a: a, s: s}
	parallelFor(j.parts, threads, j)
	*j = erfJob{}
	erfJobs.Put(j)
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
