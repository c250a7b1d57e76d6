package kernels

import (
	"math"
	"math/rand/v2"
)

// This file holds the straightforward implementations the fast kernels are
// checked against. They follow the definitions literally, accumulate in
// float64 and use math.Exp, so their own rounding error is negligible next
// to the float32 kernels' and a test failure points at the kernel.

// gemmRef computes C = alpha·op(A)·op(B) + beta·C like Gemm. It also
// returns, for each element of C, the magnitude |alpha|·Σ|a·b| + |beta·c|
// that bounds the rounding error of any float32 summation order.
func gemmRef(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) (mag []float64) {
	mag = make([]float64, m*n)
	for i := range m {
		for j := range n {
			var sum, abs float64
			for p := range k {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				sum += float64(av) * float64(bv)
				abs += math.Abs(float64(av) * float64(bv))
			}
			v := float64(alpha) * sum
			mag[i*n+j] = math.Abs(float64(alpha)) * abs
			if beta != 0 {
				old := float64(beta) * float64(c[i*ldc+j])
				v += old
				mag[i*n+j] += math.Abs(old)
			}
			c[i*ldc+j] = float32(v)
		}
	}
	return mag
}

// softmaxRef is the softmax of one row in float64, with torch.softmax's
// non-finite results: max, x − max and exp propagate NaN, so a row with a
// NaN, a +Inf or nothing but −Inf is all NaN.
func softmaxRef(row []float64) {
	maxv := math.Inf(-1)
	for _, v := range row {
		maxv = max(maxv, v) // NaN if either is NaN
	}
	var sum float64
	for i, v := range row {
		row[i] = math.Exp(v - maxv)
		sum += row[i]
	}
	for i := range row {
		row[i] /= sum
	}
}

// attendRef computes one head of attention by the definition Attend
// documents: all Tq×Tk scores (−Inf behind the causal frontier, whatever
// the product), plus the mask, softmax (with the sink as one more score,
// if the head has one; weights of 0, or NaN with EmptyRowsNaN, for a query
// that sees no key and has no sink but −Inf), dropout (drawing opt.RNG for
// every weight in row-major order, masked ones included, as Attend does),
// then the product with every row of V, in float64 where 0·NaN and 0·Inf
// are NaN. Alongside it returns, per output element, the tolerance a
// float32 implementation must meet, and the same per weight (see
// attentionTolerance); only finite results use them.
func attendRef(h Head, opt AttentionOptions) (outTol, weightTol []float64) {
	outTol = make([]float64, h.Tq*h.Dv)
	weightTol = make([]float64, h.Tq*h.Tk)
	scores := make([]float64, h.Tk)
	offset := h.Tk - h.Tq
	keep := 1 / (1 - float64(opt.Dropout))
	for i := range h.Tq {
		scoreMag := 0.0
		empty := true
		for j := range h.Tk {
			if opt.Causal && j > i+offset {
				scores[j] = math.Inf(-1)
				continue
			}
			var s, abs float64
			for p := range h.D {
				qk := float64(h.Q[i*h.LdQ+p]) * float64(h.K[j*h.LdK+p])
				s += qk
				abs += math.Abs(qk)
			}
			if !math.IsInf(abs, 0) && !math.IsNaN(abs) {
				scoreMag = math.Max(scoreMag, abs*math.Abs(float64(opt.Scale)))
			}
			// Rounded to float32 as the kernels' scores are, which decides
			// whether a huge score overflows.
			scores[j] = float64(float32(s * float64(opt.Scale)))
			m := 0.0
			if h.Mask != nil {
				m = float64(h.Mask[i*h.LdMask+j])
			}
			empty = empty && math.IsInf(m, -1)
			scores[j] += m
		}
		switch {
		case h.Sink != nil:
			// The sink is one more score, then dropped: a query that sees
			// no key gives it all the weight, unless it is −Inf.
			if empty && math.IsInf(float64(*h.Sink), -1) && !opt.EmptyRowsNaN {
				clear(scores)
				break
			}
			withSink := append(scores[:h.Tk:h.Tk], float64(*h.Sink))
			softmaxRef(withSink)
			copy(scores, withSink)
		case empty && opt.EmptyRowsNaN:
			for j := range scores {
				scores[j] = math.NaN()
			}
		case empty:
			clear(scores)
		default:
			softmaxRef(scores)
		}
		if opt.Dropout > 0 {
			for j := range scores {
				if opt.RNG.Float32() < opt.Dropout {
					scores[j] *= 0
				} else {
					scores[j] *= keep
				}
			}
		}
		rel := attentionTolerance(h.Tk, h.D, scoreMag)
		for j, w := range scores {
			if opt.Weights != nil {
				opt.Weights[i*h.Tk+j] = float32(w)
			}
			weightTol[i*h.Tk+j] = rel*math.Abs(w) + 1e-12
		}
		for c := range h.Dv {
			var sum, abs float64
			for j, w := range scores {
				v := float64(h.V[j*h.LdV+c])
				sum += w * v
				abs += math.Abs(w * v)
			}
			if h.Tk == 0 {
				sum = 0
			}
			h.Out[i*h.LdOut+c] = float32(sum)
			outTol[i*h.Dv+c] = rel*abs + 1e-5*math.Abs(sum)
		}
	}
	return outTol, weightTol
}

// attentionTolerance is the relative error allowed in a float32 attention
// weight, and in Σ_j w_ij·v_jc relative to Σ_j |w_ij·v_jc|, for a query
// whose scores have magnitude up to scoreMag (max_j Scale·Σ_p |q_p·k_jp|).
//
// A score's rounding error is about u·√D·scoreMag (u = 6e-8, the
// probabilistic bound for a D-term dot product); exp turns that absolute
// error into a relative error of the weight. The softmax sum adds u·√Tk,
// exp32 and the normalization a few u, and the product with V u·√Tk of
// Σ|w·v|. 1e-6 per unit of √· leaves a factor of ~16 over u.
func attentionTolerance(tk, d int, scoreMag float64) float64 {
	return 1e-6 * (2*math.Sqrt(float64(max(tk, 1))) + math.Sqrt(float64(max(d, 1)))*scoreMag + 4)
}

// randSlice returns n floats uniform in [−1, 1).
func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = 2*rng.Float32() - 1
	}
	return s
}
