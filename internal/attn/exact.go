// Package attn is attnrun's one general attention core: the rules between
// QKᵀ and the product with V (soft-capping, score modifications, the
// additive bias of masks, causal frontiers and windows, keys hidden by
// replacement, sinks, softmax precision, fully masked queries, dropout)
// and the geometry shared by the attention layers (package layers) and the
// executor's Attention op (package onnxio/exec). The kernels it runs stay
// in internal/kernels.
//
// NaN and ±Inf. A key can be hidden two ways, and the two differ only when
// its score is NaN or +Inf: adding −Inf to the score (the bias: ONNX's
// Attention, nn.MultiheadAttention's bool masks) leaves such a score NaN,
// so its query's row is NaN; replacing the score by −Inf (masked_fill, as
// PyTorch's reference modules and F.scaled_dot_product_attention's bool
// masks do) hides it whatever it was. A query that sees no key at all is
// NaN in PyTorch's softmax and zeros in ONNX's Attention; EmptyRowsNaN
// chooses.
package attn

import (
	"context"
	"math"
	"math/rand/v2"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/kernels"
)

// Stage names the scores of one head at a step of Exact, for callers that
// return them (ONNX Attention's qk_matmul_output_mode numbers them so).
type Stage int

// The stages of Exact, in order.
const (
	// Scaled is scale·QKᵀ.
	Scaled Stage = iota
	// Capped is after soft-capping.
	Capped
	// Biased is after the score modifications, the bias and the hidden
	// keys.
	Biased
	// Weights is after the softmax: the attention weights, before dropout.
	Weights
)

// Exact is the general rule of one head computed step by step, for what
// the fused kernel (kernels.Attend) does not do:
//
//	s = scale·QKᵀ                     a GEMM; 0 when the head size is 0
//	s = softcap·tanh(s / softcap)     if Softcap != 0
//	s = Modify(s)                     row by row, if set
//	s = s + Bias                      −Inf where the bias hides a key
//	s = −Inf where Hide says          replaced, whatever s was
//	w = softmax(s)                    with the head's sink, in Precision
//	w = 0 on rows whose bias is all −Inf, unless EmptyRowsNaN (or a NaN
//	    or +Inf sink, which makes every weight NaN)
//	w = dropout(w)                    one draw per weight, row by row
//	out = w·V
type Exact struct {
	Scale   float32
	Softcap float32
	// Bias is the Tq×Tk additive bias of the head, row-major.
	Bias []float32
	// Modify, if set, changes row i of the capped scores in place (score
	// modifications).
	Modify func(row []float32, i int)
	// Hide, if set, writes −Inf over the scores of row i that are hidden
	// by replacement, after the bias is added.
	Hide func(row []float32, i int)
	// Precision is the type the softmax is computed in: Float32 (or
	// Undefined) with kernels.SoftmaxRows; Float64, Float16 or BFloat16
	// in float64, the narrow types rounding the scores before and the
	// weights after.
	Precision array.DType
	// EmptyRowsNaN keeps the softmax's NaN for a query that sees no key
	// instead of zeros.
	EmptyRowsNaN bool
	// Dropout, if positive, zeroes each weight with that probability,
	// drawn from RNG, and scales the others by 1/(1−Dropout).
	Dropout float32
	RNG     *rand.Rand
	// Snapshot, if set, is shown the scores after each stage.
	Snapshot func(Stage, []float32)
	// Ctx, if set, stops the products when it is done; Attend then
	// returns its error.
	Ctx context.Context
}

// Attend computes head h (its Sink included) into h.Out, with s, of
// h.Tq·h.Tk floats, as the scores and then the weights, which it holds on
// return.
func (e *Exact) Attend(h kernels.Head, s []float32) error {
	tq, tk := h.Tq, h.Tk
	if h.D > 0 {
		if err := e.gemm(false, true, tq, tk, h.D, e.Scale, h.Q, h.LdQ, h.K, h.LdK, s, tk); err != nil {
			return err
		}
	} else {
		clear(s) // no features: every score is 0
	}
	e.snapshot(Scaled, s)
	if e.Softcap != 0 {
		c := float64(e.Softcap)
		for i, v := range s {
			s[i] = float32(c * math.Tanh(float64(v)/c))
		}
	}
	e.snapshot(Capped, s)
	for i := 0; e.Modify != nil && i < tq; i++ {
		e.Modify(s[i*tk:(i+1)*tk], i)
	}
	for i, b := range e.Bias[:tq*tk] {
		s[i] += b
	}
	for i := 0; e.Hide != nil && i < tq; i++ {
		e.Hide(s[i*tk:(i+1)*tk], i)
	}
	e.snapshot(Biased, s)
	e.softmax(s, tq, tk, h.Sink)
	if !e.EmptyRowsNaN && !SinkPoisons(h.Sink) {
		for i := range tq {
			if AllNegInf(e.Bias[i*tk : (i+1)*tk]) {
				clear(s[i*tk : (i+1)*tk])
			}
		}
	}
	e.snapshot(Weights, s)
	if e.Dropout > 0 {
		keep := 1 / (1 - e.Dropout)
		for i := range s {
			if e.RNG.Float32() < e.Dropout {
				s[i] *= 0 // a NaN weight stays NaN, as PyTorch's dropout multiplies
			} else {
				s[i] *= keep
			}
		}
	}
	if h.Dv > 0 {
		return e.gemm(false, false, tq, h.Dv, tk, 1, s, tk, h.V, h.LdV, h.Out, h.LdOut)
	}
	return nil
}

// gemm is kernels.Gemm, or kernels.GemmContext under e.Ctx.
func (e *Exact) gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) error {
	if e.Ctx == nil {
		kernels.Gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, 0, c, ldc)
		return nil
	}
	return kernels.GemmContext(e.Ctx, transA, transB, m, n, k, alpha, a, lda, b, ldb, 0, c, ldc)
}

func (e *Exact) snapshot(st Stage, s []float32) {
	if e.Snapshot != nil {
		e.Snapshot(st, s)
	}
}

// softmax normalizes each row of s in place, in e.Precision; a row is NaN
// if it holds a NaN or a +Inf or nothing but −Inf.
func (e *Exact) softmax(s []float32, tq, tk int, sink *float32) {
	switch {
	case sink != nil:
		kernels.SoftmaxRowsSink(s, tq, tk, *sink)
		return
	case e.Precision == array.Undefined || e.Precision == array.Float32:
		kernels.SoftmaxRows(s, tq, tk)
		return
	}
	round := func(x float32) float32 { return x }
	if e.Precision != array.Float64 {
		round = func(x float32) float32 { return array.RoundFloat(e.Precision, float64(x), false) }
	}
	for i := range tq {
		row := s[i*tk : (i+1)*tk]
		top := math.Inf(-1)
		for j, x := range row {
			row[j] = round(x)
			top = max(top, float64(row[j])) // NaN if either is NaN
		}
		var sum float64
		for _, x := range row {
			sum += math.Exp(float64(x) - top)
		}
		for j, x := range row {
			row[j] = round(float32(math.Exp(float64(x)-top) / sum))
		}
	}
}

// SinkPoisons reports whether a sink makes every weight NaN: it is NaN or
// +Inf (see kernels.Head.Sink).
func SinkPoisons(sink *float32) bool {
	return sink != nil && (math.IsNaN(float64(*sink)) || math.IsInf(float64(*sink), 1))
}

// AllNegInf reports whether every value of row is −Inf.
func AllNegInf(row []float32) bool {
	for _, v := range row {
		if !math.IsInf(float64(v), -1) {
			return false
		}
	}
	return true
}

// FillNegInf sets every element of s to −Inf.
func FillNegInf(s []float32) {
	for i := range s {
		s[i] = float32(math.Inf(-1))
	}
}

// KVHead is the key/value head query head h of qHeads reads among kvHeads:
// grouped-query attention repeats each KV head for qHeads/kvHeads
// consecutive query heads (as PyTorch's enable_gqa and ONNX Runtime do).
func KVHead(h, qHeads, kvHeads int) int { return h / (qHeads / kvHeads) }
