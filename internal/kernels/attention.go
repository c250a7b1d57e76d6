package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
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
	// Sink, if non-nil, is the head's sink logit (gpt-oss's attention
	// sinks): one more score in every query's softmax, for a key that has
	// no value. The weights of the real keys then sum to less than one, and
	// a query that sees no key gives the sink all its weight (weights of
	// 0, whatever EmptyRowsNaN says). A NaN or +Inf sink makes every query
	// NaN, as it makes softmax; a −Inf sink is no sink.
	Sink *float32
}

// AttentionOptions selects scaling, masking and dropout for Attend.
type AttentionOptions struct {
	// Scale multiplies QKᵀ before the softmax, usually 1/√D.
	Scale float32
	// Causal lets query i see keys j ≤ i + (Tk − Tq): the diagonal is
	// aligned bottom-right, which for Tq == Tk is the usual lower triangle.
	// The scores of later keys are never looked at (see Attend).
	Causal bool
	// EmptyRowsNaN makes a query that sees no key output NaN (and NaN
	// weights), as a plain softmax over nothing but −Inf does in PyTorch and
	// ONNX. Without it such a query's weights are 0 (FlashAttention's,
	// PyTorch 2.5's SDPA and the ONNX Attention operator's choice).
	EmptyRowsNaN bool
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
// Without dropout, the query blocks run in parallel on all processors.
//
// NaN and ±Inf come out as in PyTorch's softmax(s)·V written out:
//   - The mask is added (IEEE arithmetic: NaN or +Inf plus −Inf is NaN);
//     the causal frontier instead hides a key's score whatever it is, as
//     masked_fill(−inf) does. Where the two must agree for non-finite
//     scores, see FiniteScores.
//   - A query whose visible scores include a NaN or a +Inf, or are all
//     −Inf, gets NaN weights and output, as softmax gives.
//   - A query that sees no key (every key behind the causal frontier or
//     masked by −Inf) gets weights of 0, or NaN with EmptyRowsNaN (and no
//     finite Head.Sink to take the weight).
//   - A sink takes part in every query's softmax as one more score (see
//     Head.Sink).
//   - The weights multiply every row of V, hidden keys' included: a weight
//     of 0 times a NaN or ±Inf value is NaN, so such a value reaches every
//     query's output in its column, as the product weights·V does. Skipped
//     causal tiles are accounted for without being multiplied.
//
// Attend panics if a slice is too short for the sizes and strides given.
func Attend(h Head, opt AttentionOptions) {
	checkHead("Attend", &h, &opt, 0)
	attendOne(&h, &opt, opt.Weights, maxThreads())
}

// AttendBatch computes Attend for every head of heads, typically the B·H
// heads of a multi-head layer, spreading them over all processors when
// they are work enough (a token of decoding is not).
//
// Options apply to every head. If opt.Weights is non-nil it receives the
// weights of all heads one after another: head i's Tq×Tk block starts
// after the blocks of heads 0..i−1. With dropout, the heads run in order
// on the calling goroutine, drawing opt.RNG as consecutive Attend calls
// would, so the result does not depend on the number of processors.
// The heads' Out regions must not overlap.
func AttendBatch(heads []Head, opt AttentionOptions) {
	off, work := 0, 0
	for i := range heads {
		h := &heads[i]
		checkHead("AttendBatch", h, &opt, off)
		off += h.Tq * h.Tk
		work += tileWork(h)
	}
	threads := maxThreads()
	if work < parallelMinFlops/16 || work < parallelMinFlops && machineBusy(time.Now()) {
		// One token of twelve heads takes about 7 µs on one core, less
		// than handing half of it to a worker gains; eight tokens (22 µs)
		// take about half as long on two cores. On a busy machine, where
		// a worker may not be running, from 8 MFLOP.
		threads = 1
	}
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
	j := freeBatchJobs.get()
	j.heads, j.opt = heads, opt
	parallelFor(len(heads), threads, j)
	j.heads, j.opt = nil, AttentionOptions{}
	freeBatchJobs.put(j)
}

// tileWork estimates the work of head h on the fused kernel, in
// floating-point operations: its tiles' (mr rows padded on kernels
// without a few-rows one, nr keys, nr output columns; the causal half
// counted) and, for what a head costs whatever its size (setting it up,
// packing K, the softmax of each row), the equivalent of 20 000.
func tileWork(h *Head) int {
	kern := currentISA().gemm
	rows := h.Tq
	if kern.rows == nil {
		rows = roundUp(rows, kern.mr)
	}
	return 2*rows*roundUp(h.Tk, kern.nr)*(h.D+roundUp(h.Dv, kern.nr)) + 20_000
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
	if fewQueries(currentISA(), h, opt) {
		ws := freeWorkspaces.get()
		attendFew(h, opt, ws)
		freeWorkspaces.put(ws)
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

// FiniteScores reports whether every score scale·q·k that rows of q and k
// (d wide) can form is certainly finite: q and k hold finite numbers only,
// small enough that no dot product of d terms can overflow float32, in
// any order of summation and before or after the scaling.
//
// Attend hides the keys behind the causal frontier by never looking at
// their scores, as PyTorch's masked_fill(−inf) does. An additive mask
// (nn.MultiheadAttention's, F.scaled_dot_product_attention's math path,
// ONNX's Add and Attention) adds −Inf instead, which turns a NaN or +Inf
// score into NaN and so makes the whole row NaN. The two agree when the
// scores are finite: a caller that adds its masks calls FiniteScores and,
// when it is false, passes the frontier as a mask of −Inf instead of
// setting Causal. The scan costs O((Tq+Tk)·d), little next to attention.
func FiniteScores(q, k []float32, d int, scale float32) bool {
	mq, okq := maxAbs(q)
	mk, okk := maxAbs(k)
	if !okq || !okk {
		return false
	}
	bound := float64(d) * float64(mq) * float64(mk) * max(1, math.Abs(float64(scale)))
	return bound < math.MaxFloat32/2 // a factor of 2 for the rounding of the sums
}

// maxAbs returns the largest magnitude in x, and false if x holds a NaN or
// an infinity.
func maxAbs(x []float32) (float32, bool) {
	// On the bits without the sign: the magnitudes of finite floats order
	// as their bits do, and NaN and the infinities are the bits from
	// 0x7f800000 up. Unsigned max has none of the NaN and signed-zero
	// branches float max has (it was 4% of a short BERT pass).
	var m uint32
	for _, v := range x {
		m = max(m, math.Float32bits(v)&^(1<<31))
	}
	if m >= 0x7f800000 {
		return 0, false
	}
	return math.Float32frombits(m), true
}

// seesNoKey reports whether query i sees no key: the causal frontier hides
// them all, or the mask is −Inf on every key the frontier leaves.
func (h *Head) seesNoKey(i int, causal bool) bool {
	n := visibleKeys(i, h.Tq, h.Tk, causal)
	if n == 0 {
		return true
	}
	mask := h.maskRow(i)
	if mask == nil {
		return false
	}
	for _, m := range mask[:n] {
		if !math.IsInf(float64(m), -1) {
			return false
		}
	}
	return true
}

// sinkFinite reports whether the head has a sink that takes part in the
// softmax as an ordinary score would: finite.
func (h *Head) sinkFinite() bool { return h.Sink != nil && isFinite(*h.Sink) }

// sinkPoisons reports whether the head's sink makes every query NaN: it is
// NaN or +Inf, as a score that makes softmax NaN.
func (h *Head) sinkPoisons() bool {
	return h.Sink != nil && (math.IsNaN(float64(*h.Sink)) || math.IsInf(float64(*h.Sink), 1))
}

// visibleKeys returns how many keys query i may see: all Tk, or with a
// causal mask those up to the bottom-right-aligned diagonal.
func visibleKeys(i, tq, tk int, causal bool) int {
	if !causal {
		return tk
	}
	return min(tk, max(0, i+tk-tq+1))
}
