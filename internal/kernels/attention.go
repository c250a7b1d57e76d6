package kernels

import (
	"math"
	"math/rand/v2"
)

// Head addresses the operands of one attention head inside larger buffers.
// Q is Tq×D, K is Tk×D, V is Tk×Dv and Out is Tq×Dv, each with its own row
// stride (Ld*), so a head of a (T, H·dh) projection is used in place.
type Head struct {
	Q     []float32
	LdQ   int
	K     []float32
	LdK   int
	V     []float32
	LdV   int
	Out   []float32
	LdOut int
	Tq    int
	Tk    int
	D     int
	Dv    int
}

// AttentionOptions selects scaling, masking and dropout for Attend.
type AttentionOptions struct {
	// Scale multiplies QKᵀ before the softmax, usually 1/√D.
	Scale float32
	// Causal lets query i see keys j ≤ i + (Tk − Tq): the diagonal is
	// aligned bottom-right, which for Tq == Tk is the usual lower triangle.
	Causal bool
	// Dropout is the probability of zeroing a weight after the softmax; the
	// kept weights are scaled by 1/(1−Dropout). It needs RNG.
	Dropout float32
	// RNG draws the dropout mask.
	RNG *rand.Rand
	// Weights, if non-nil, receives the Tq×Tk weights that multiply V (dense,
	// row stride Tk): after mask and softmax, and after dropout.
	Weights []float32
}

// Attend computes Out = dropout(softmax(Scale·QKᵀ + mask))·V for one head.
func Attend(h Head, opt AttentionOptions) {
	scores := make([]float32, h.Tk)
	offset := h.Tk - h.Tq
	keep := 1 / (1 - opt.Dropout)
	for i := 0; i < h.Tq; i++ {
		q := h.Q[i*h.LdQ : i*h.LdQ+h.D]
		limit := h.Tk
		if opt.Causal {
			limit = min(h.Tk, max(0, i+offset+1))
		}
		for j := 0; j < h.Tk; j++ {
			if j >= limit {
				scores[j] = float32(math.Inf(-1))
				continue
			}
			k := h.K[j*h.LdK : j*h.LdK+h.D]
			var s float32
			for p, qv := range q {
				s += qv * k[p]
			}
			scores[j] = s * opt.Scale
		}
		softmax(scores)
		if opt.Dropout > 0 {
			for j := range scores {
				if opt.RNG.Float32() < opt.Dropout {
					scores[j] = 0
				} else {
					scores[j] *= keep
				}
			}
		}
		if opt.Weights != nil {
			copy(opt.Weights[i*h.Tk:(i+1)*h.Tk], scores)
		}
		out := h.Out[i*h.LdOut : i*h.LdOut+h.Dv]
		clear(out)
		for j, w := range scores {
			if w == 0 {
				continue
			}
			v := h.V[j*h.LdV : j*h.LdV+h.Dv]
			for p, vv := range v {
				out[p] += w * vv
			}
		}
	}
}
