package kernels

import (
	"math"
	"sync"
)

// Erf32 sets dst[i] to erf(src[i]), computed in float32: BERT's GELU
// (x/2·(1+erf(x/√2))) spent more time in math.Erf than in all its matrix
// products. Large slices are split across the processors. dst and src
// have the same length and may be the same slice.
//
// The result is within one ulp of float32(math.Erf(float64(x))) for every
// float32 x (all 2³² were checked) and equals it for 94% of the values
// below ½, 98.6% of those from ½ to 4 and all the others; its absolute
// error is at most 4.1e-8. Near 0 it is x + x·Q(x²), which keeps the
// relative precision of erf(x) ≈ 2x/√π down to the subnormals; from ½ to
// 4 one of fourteen polynomials of degree 6 in the offset from the middle
// of its quarter, whose constant term is split in two floats; ±1 from 4
// on; NaN is returned as it is. Every product and sum is rounded on its own,
// with no fused multiply-add, so the Go code and the AVX-512 code
// (gelu_avx512_amd64.s, sixteen values at a time) give the same bits.
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
// about 4 µs of work with the vector code, above the cost of waking a
// worker, and small enough that a sentence's GELU (32 tokens of BERT's
// 1536 hidden values) is split in six (with two threads it took 15 µs,
// against 20 µs in parts twice as large and 27 µs on one thread).
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
	erfLimit  = 4   // erf(x) rounds to 1 in float32 from here on
	erfOdd    = 0.5 // below this, x + x·Q(x²)
	erfPieces = 16  // table columns, a quarter of [0, erfLimit) each
	erfTerms  = 6   // coefficients of the Horner polynomial of a column
	erfHi     = erfTerms
	erfLo     = erfTerms + 1
)

var (
	erfOnce sync.Once
	// erfTable[k][i] is the coefficient of vᵏ (k < erfTerms) in column i's
	// polynomial R. Columns from erfOdd on approximate erf on their
	// quarter [i, i+1)/4: erf(x) ≈ (t·R(t) + lo) + hi, with t = 4x − i − ½
	// ∈ [−½, ½) and erfTable[erfHi][i] + erfTable[erfLo][i] the value at
	// the middle. The columns below erfOdd both hold Q: erf(x) ≈ x·Q(x²) +
	// x. Stored power by power, so that the vector code picks each power's
	// sixteen coefficients with one permutation instead of a gather.
	erfTable [erfTerms + 2][erfPieces]float32
)

// buildErfTable fills erfTable from interpolations of math.Erf at
// Chebyshev points, within 2e-11 of erf(x)/x − 1 for Q and 2e-10 of erf
// for the quarters (a few thousandths of a float32 ulp); rounding their
// coefficients to float32 and the float32 arithmetic cost more.
func buildErfTable() {
	q := chebyshevFit(func(z float64) float64 {
		x := math.Sqrt(z)
		return math.Erf(x)/x - 1
	}, 0, erfOdd*erfOdd, erfTerms-1)
	for i := range erfPieces {
		if i < erfOdd*erfPieces/erfLimit {
			for k, c := range q {
				erfTable[k][i] = float32(c)
			}
			continue
		}
		middle := (float64(i) + 0.5) * erfLimit / erfPieces
		p := chebyshevFit(func(t float64) float64 {
			return math.Erf(middle + t*erfLimit/erfPieces)
		}, -0.5, 0.5, erfTerms)
		hi := float32(p[0])
		erfTable[erfHi][i] = hi
		erfTable[erfLo][i] = float32(p[0] - float64(hi))
		for k := range erfTerms {
			erfTable[k][i] = float32(p[k+1])
		}
	}
}

// chebyshevFit returns the coefficients, in powers of v, of the polynomial
// of the given degree that equals f at the Chebyshev points of [lo, hi],
// which is within a small factor of the best approximation there.
func chebyshevFit(f func(v float64) float64, lo, hi float64, degree int) []float64 {
	n := degree + 1
	mid, half := (lo+hi)/2, (hi-lo)/2
	values := make([]float64, n)
	for j := range values {
		values[j] = f(mid + half*math.Cos(math.Pi*(float64(j)+0.5)/float64(n)))
	}
	// f ≈ Σ c_k·T_k(s) with s = (v − mid)/half = α·v + β.
	c := make([]float64, n)
	for k := range c {
		for j, y := range values {
			c[k] += y * math.Cos(math.Pi*float64(k)*(float64(j)+0.5)/float64(n))
		}
		c[k] *= 2 / float64(n)
	}
	c[0] /= 2
	// The T_k as polynomials in v (T₀ = 1, T₁ = s, T_{k+1} = 2s·T_k −
	// T_{k−1}), summed with their weights.
	alpha, beta := 1/half, -mid/half
	p := make([]float64, n)
	prev, cur := make([]float64, n), make([]float64, n)
	prev[0] = 1
	cur[0], cur[1] = beta, alpha
	p[0] = c[0] + c[1]*beta
	p[1] = c[1] * alpha
	for k := 2; k < n; k++ {
		next := make([]float64, n)
		for m := range next {
			next[m] = 2*beta*cur[m] - prev[m]
			if m > 0 {
				next[m] += 2 * alpha * cur[m-1]
			}
			p[m] += c[k] * next[m]
		}
		prev, cur = cur, next
	}
	return p
}

// erfRange is Erf32 on one goroutine.
func erfRange(dst, src []float32) {
	dst = dst[:len(src)]
	done := erfVector(dst, src)
	for i, v := range src[done:] {
		dst[done+i] = erf32(v)
	}
}

// erf32 is Erf32 of one value, with the vector code's operations.
func erf32(x float32) float32 {
	const sign = 1 << 31
	a := math.Float32frombits(math.Float32bits(x) &^ sign)
	var r float32
	switch {
	case a < erfOdd:
		// a·Q, then + lo (0 in these columns: the vector code adds it
		// for every lane, and a·Q is never −0), then + a.
		r = float32(a*erfHorner(0, a*a)) + a
	case a < erfLimit:
		u := a * (erfPieces / erfLimit)
		i := uint32(u)
		t := u - float32(i) - 0.5
		r = float32(float32(t*erfHorner(i, t))+erfTable[erfLo][i]) + erfTable[erfHi][i]
	case a >= erfLimit:
		r = 1
	default: // NaN
		return x
	}
	return math.Float32frombits(math.Float32bits(r) ^ math.Float32bits(x)&sign)
}

// erfHorner evaluates column i's polynomial R at v, each product and sum
// rounded to float32 (the conversion forbids fusing them).
func erfHorner(i uint32, v float32) float32 {
	i %= erfPieces
	y := erfTable[erfTerms-1][i]
	for k := erfTerms - 2; k >= 0; k-- {
		y = float32(y*v) + erfTable[k][i]
	}
	return y
}

// GeluErf32 sets dst[i] to ((x·(erf(x/c) + a))·s) for x = src[i], with
// the float32 operations of the exported GELU's nodes in their order
// (Div, Erf, Add, Mul, Mul: c = √2, a = 1, s = 0.5 in BERT), Erf as
// Erf32 computes it, so that it gives the bits of those nodes run one by
// one on the executor; large slices are split across the processors.
// dst and src have the same length and may be the same slice.
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
		e := erf32(float32(x / c))
		m := float32(x * float32(e+a))
		dst[i] = float32(m * s)
	}
}
