package kernels

import (
	"fmt"
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
	// Mask, if non-nil, is added to the scaled scores before the softmax:
	// Tq×Tk with row stride LdMask, −Inf where a query may not see a key
	// (a boolean mask becomes 0 / −Inf). LdMask 0 uses one row for every
	// query, as a key-padding mask does.
	Mask   []float32
	LdMask int
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
	// RNG draws the dropout mask: one Float32 per weight, row by row, all
	// Tk of each row (masked ones included), so the mask does not depend
	// on how the computation is tiled.
	RNG *rand.Rand
	// Weights, if non-nil, receives the Tq×Tk weights that multiply V (dense,
	// row stride Tk): after mask and softmax, and after dropout.
	// Requesting them costs O(Tq·Tk) memory and time; without them Attend
	// needs memory proportional to Tk·(D+Dv) only.
	Weights []float32
}

// Attend computes Out = dropout(softmax(Scale·QKᵀ + mask))·V for one head.
//
// Attend never forms the Tq×Tk score matrix (unless Weights asks for it):
// it walks blocks of queries against tiles of keys, keeping a running
// maximum and sum per query (an "online" softmax, as in FlashAttention), so
// its memory is O(Tk·(D+Dv)). Causal tiles above the diagonal are skipped.
// A query that can see no key (every score −Inf) gets an output of zeros.
// Without dropout, the query blocks run in parallel on all processors.
//
// Attend panics if a slice is too short for the sizes and strides given.
func Attend(h Head, opt AttentionOptions) {
	checkHead("Attend", &h, &opt, 0)
	attendOne(&h, &opt, opt.Weights, maxThreads())
}

// AttendBatch computes Attend for every head of heads, typically the B·H
// heads of a multi-head layer, spreading them over all processors.
//
// Options apply to every head. If opt.Weights is non-nil it receives the
// weights of all heads one after another: head i's Tq×Tk block starts
// after the blocks of heads 0..i−1. With dropout, the heads run in order
// on the calling goroutine, drawing opt.RNG as consecutive Attend calls
// would, so the result does not depend on the number of processors.
// The heads' Out regions must not overlap.
func AttendBatch(heads []Head, opt AttentionOptions) {
	off := 0
	for i := range heads {
		checkHead("AttendBatch", &heads[i], &opt, off)
		off += heads[i].Tq * heads[i].Tk
	}
	threads := maxThreads()
	// Whole heads per thread balance when they go round evenly or there
	// are many; otherwise (3 heads on 2 threads) each head is split.
	byHead := len(heads)%threads == 0 || len(heads) >= 4*threads
	if opt.Weights != nil || opt.Dropout > 0 || !byHead || threads == 1 {
		// Weights and dropout are about exact, ordered output.
		off := 0
		for i := range heads {
			h := &heads[i]
			var w []float32
			if opt.Weights != nil {
				w = opt.Weights[off : off+h.Tq*h.Tk]
				off += h.Tq * h.Tk
			}
			attendOne(h, &opt, w, threads)
		}
		return
	}
	j := getBatchJob()
	j.heads, j.opt = heads, opt
	parallelFor(len(heads), threads, j)
	j.heads, j.opt = nil, AttentionOptions{}
	putBatchJob(j)
}

// attendOne runs one head on up to threads goroutines, writing its
// weights to w if w is non-nil.
func attendOne(h *Head, opt *AttentionOptions, w []float32, threads int) {
	if h.Tq == 0 {
		return
	}
	if w != nil {
		attendWithWeights(h, opt, w, threads)
		return
	}
	attendFlash(h, opt, threads)
}

// checkHead panics with a message naming the operand if a head's sizes,
// strides or slices do not fit, or the options cannot be honored. off is
// where the head's weights start in opt.Weights.
func checkHead(fn string, h *Head, opt *AttentionOptions, off int) {
	if h.Tq < 0 || h.Tk < 0 || h.D < 0 || h.Dv < 0 {
		panic(fmt.Sprintf("kernels: %s: negative size Tq=%d Tk=%d D=%d Dv=%d", fn, h.Tq, h.Tk, h.D, h.Dv))
	}
	checkMatrix(fn, "Q", h.Q, h.Tq, h.D, h.LdQ, 1, 0)
	checkMatrix(fn, "K", h.K, h.Tk, h.D, h.LdK, 1, 0)
	checkMatrix(fn, "V", h.V, h.Tk, h.Dv, h.LdV, 1, 0)
	checkMatrix(fn, "Out", h.Out, h.Tq, h.Dv, h.LdOut, 1, 0)
	if h.Mask != nil {
		if h.LdMask != 0 {
			checkMatrix(fn, "Mask", h.Mask, h.Tq, h.Tk, h.LdMask, 1, 0)
		} else {
			checkMatrix(fn, "Mask", h.Mask, 1, h.Tk, h.Tk, 1, 0)
		}
	}
	if opt.Weights != nil && len(opt.Weights) < off+h.Tq*h.Tk {
		panic(fmt.Sprintf("kernels: %s: Weights holds %d floats, need %d", fn, len(opt.Weights), off+h.Tq*h.Tk))
	}
	if opt.Dropout > 0 && opt.RNG == nil {
		panic(fmt.Sprintf("kernels: %s: Dropout %g needs an RNG", fn, opt.Dropout))
	}
}

// maskRow returns row i of h's mask, or nil.
func (h *Head) maskRow(i int) []float32 {
	if h.Mask == nil {
		return nil
	}
	return h.Mask[i*h.LdMask : i*h.LdMask+h.Tk]
}

// visibleKeys returns how many keys query i may see: all Tk, or with a
// causal mask those up to the bottom-right-aligned diagonal.
func visibleKeys(i, tq, tk int, causal bool) int {
	if !causal {
		return tk
	}
	return min(tk, max(0, i+tk-tq+1))
}
