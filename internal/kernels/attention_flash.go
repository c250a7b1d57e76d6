package kernels

import (
	"math"
)

// The fused attention kernel: for a block of bq queries it walks the keys
// in tiles of bk, computing the bq×bk scores with the GEMM micro-kernel,
// folding them into a running softmax, and adding their product with V
// into a bq×Dv accumulator, again with the micro-kernel. Per query it keeps
// the largest score so far (m) and the sum of exp(score − m) (l); when a
// tile raises m, what was accumulated is rescaled by exp(m_old − m_new).
// At the end the accumulator divided by l is the softmax-weighted sum of V.
// Only a few tiles and K and V (packed once per head) are ever in memory.

// Tile sizes. A bq×bk score tile of 64×256 floats is 64 KiB and stays in
// L2 with the Q block and the accumulator; the PV micro-kernel calls then
// run bk = 256 steps, long enough to hide their set-up. (bk = 256 measured
// ~10% faster than 128 on Zen 5; bq = 64 keeps the causal waste on the
// diagonal small.)
const (
	flashQueries = 64  // bq, rounded up to the kernel's mr
	flashKeys    = 256 // bk, a multiple of every kernel's nr
)

// attnScratch is one goroutine's attention buffers.
type attnScratch struct {
	kp, vp []float32 // the head's K (and V if need be), packed as B operands
	q      []float32 // a ragged last query block, zero-padded to mr rows
	s      []float32 // scores of one tile, then its weights: bq×bk, row stride bk
	acc    []float32 // output accumulator, bq×dvPad
	m, l   []float32 // running maximum and sum per query
	empty  []bool    // per query of the block: it sees no key
	drop   []uint64  // dropout bits of the block: 1 = dropped
	bad    []int     // the head's lastBad (see flash)
}

// flash is one head set up for the fused kernel.
// It holds copies of the head and options, not pointers: Attend's
// arguments then stay on the caller's stack instead of escaping to the
// heap with the pooled job.
type flash struct {
	h      Head
	opt    AttentionOptions
	set    *isa
	kern   *microKernel
	bq, bk int
	dvPad  int       // Dv rounded up to the kernel's nr
	blocks int       // query blocks
	kp     []float32 // K packed as the B operand of QKᵀ
	vb     []float32 // V as the B operand of PV: in place, or packed
	vRow   int       // row stride of vb
	vPack  bool      // vb is packed
	keep   float32   // 1/(1−Dropout)
	// lastBad[c] is the last key whose value in column c is NaN or ±Inf,
	// among the keys past the first block's causal frontier (−1 if none);
	// nil when no key is ever skipped or every such value is finite. A
	// block that skips key lastBad[c] outputs NaN in column c: its zero
	// weight times that value.
	lastBad []int
}

// setup fills f for head h and packs its K into ws as the B operand of
// QKᵀ (Kᵀ in panels of nr keys). V is the B operand of PV as it is, unless
// Dv is not a multiple of nr: then the last columns would be read past the
// row, and V is packed (zero-padded) instead.
func (f *flash) setup(h *Head, opt *AttentionOptions, ws *workspace) {
	set := currentISA()
	kern := set.gemm
	*f = flash{
		h: *h, opt: *opt, set: set, kern: kern,
		bq:    roundUp(flashQueries, kern.mr),
		bk:    flashKeys,
		dvPad: roundUp(h.Dv, kern.nr),
		keep:  1 / (1 - opt.Dropout),
	}
	f.blocks = ceilDiv(h.Tq, f.bq)
	sc := &ws.attn
	sc.kp = grow(sc.kp, roundUp(h.Tk, kern.nr)*h.D)
	packB(set, sc.kp, h.K, h.LdK, true, 0, h.D, 0, h.Tk, kern.nr)
	f.kp = sc.kp
	if opt.Causal {
		// Every tile of queries multiplies the keys up to its last
		// query's frontier by V (see tileEnd), so at least those the
		// first query sees.
		first := visibleKeys(0, h.Tq, h.Tk, true)
		f.lastBad = lastNonFinite(&sc.bad, h.V, h.LdV, first, h.Tk, h.Dv)
	}
	if h.Dv%kern.nr == 0 {
		f.vb, f.vRow = h.V, h.LdV
		return
	}
	sc.vp = grow(sc.vp, f.dvPad*h.Tk)
	packB(set, sc.vp, h.V, h.LdV, false, 0, h.Tk, 0, h.Dv, kern.nr)
	f.vb, f.vRow, f.vPack = sc.vp, kern.nr, true
}

// vPanel returns the B operand of PV for keys j0.. and output columns
// c..c+nr.
func (f *flash) vPanel(j0, c int) []float32 {
	if f.vPack {
		return f.vb[c*f.h.Tk+j0*f.kern.nr:] // packed: panel c/nr holds Tk·nr floats
	}
	return f.vb[j0*f.vRow+c:]
}

// attendFlash runs the fused kernel for one head on up to threads
// goroutines (one when dropout draws from the RNG, whose order is fixed).
func attendFlash(h *Head, opt *AttentionOptions, threads int) {
	ws := freeWorkspaces.get()
	j := freeFlashJobs.get()
	j.f.setup(h, opt, ws)
	work := 2 * h.Tq * h.Tk * (h.D + h.Dv)
	switch {
	case opt.Dropout > 0:
		// The dropout mask is drawn block by block: keep the order.
		for b := range j.f.blocks {
			j.f.block(ws, b)
		}
	case work < parallelMinFlops:
		parallelFor(j.f.blocks, 1, j)
	default:
		parallelFor(j.f.blocks, threads, j)
	}
	j.f = flash{}
	freeFlashJobs.put(j)
	freeWorkspaces.put(ws)
}

// flashJob runs the query blocks of one head as parts. The last blocks go
// first: under a causal mask they see the most keys, and starting the long
// parts early balances the threads.
type flashJob struct{ f flash }

// runPart computes one query block with a workspace of its own.
func (j *flashJob) runPart(part int) {
	ws := freeWorkspaces.get()
	j.f.block(ws, j.f.blocks-1-part)
	freeWorkspaces.put(ws)
}

// block computes the output rows of query block b.
func (f *flash) block(ws *workspace, b int) {
	h, opt, kern := &f.h, &f.opt, f.kern
	mr, nr, bk := kern.mr, kern.nr, f.bk
	i0 := b * f.bq
	rows := min(f.bq, h.Tq-i0)
	rowsPad := roundUp(rows, mr)
	if kern.rows != nil {
		rowsPad = rows // the last rows take the few-rows kernel
	}

	// Q is read in place, except for a ragged last block on a kernel
	// without a few-rows one: it computes whole tiles, so that block is
	// copied and zero-padded.
	sc := &ws.attn
	qa, ldq := h.Q[i0*h.LdQ:], h.LdQ
	// Buffers are grown for a full block even for a ragged one, so that
	// each workspace reaches its final size on first use.
	if rows < rowsPad {
		sc.q = grow(sc.q, f.bq*h.D)[:rowsPad*h.D]
		clear(sc.q)
		for r := range rows {
			copy(sc.q[r*h.D:(r+1)*h.D], h.Q[(i0+r)*h.LdQ:])
		}
		qa, ldq = sc.q, h.D
	}
	sc.s = grow(sc.s, f.bq*bk)
	sc.acc = grow(sc.acc, f.bq*f.dvPad)[:rowsPad*f.dvPad]
	clear(sc.acc)
	sc.m = grow(sc.m, f.bq)[:rows]
	sc.l = grow(sc.l, f.bq)[:rows]
	if cap(sc.empty) < f.bq {
		sc.empty = make([]bool, f.bq)
	}
	sc.empty = sc.empty[:rows]
	// A finite sink is a first score every query has seen: the running
	// maximum starts at it, the sum at its weight e^(sink−sink) = 1.
	m0, l0 := float32(math.Inf(-1)), float32(0)
	if h.sinkFinite() {
		m0, l0 = *h.Sink, 1
	}
	for r := range rows {
		sc.m[r] = m0
		sc.l[r] = l0
		sc.empty[r] = h.seesNoKey(i0+r, opt.Causal)
	}
	if opt.Dropout > 0 {
		f.drawDropout(sc, rows)
	}

	// Keys past what the block's last query sees are never loaded.
	kEnd := visibleKeys(i0+rows-1, h.Tq, h.Tk, opt.Causal)
	for j0 := 0; j0 < kEnd; j0 += bk {
		cols := min(bk, kEnd-j0)
		colsPad := roundUp(cols, nr)

		// S = Scale·Q·Kᵀ for the tile. Under a causal mask a tile of
		// queries stops at the panel of the last key its last query sees:
		// softmaxStep reads no score past a query's frontier.
		for ir, tr := 0, 0; ir < rowsPad; ir += tr {
			tr = f.tileRows(ir, rowsPad)
			end := roundUp(min(cols, f.tileEnd(i0, ir, tr, rows)-j0), nr)
			for jp := 0; jp < end; jp += nr {
				kpanel := f.kp[(j0+jp)*h.D : (j0+jp+nr)*h.D]
				kern.shortTile(tr, h.D, qa[ir*ldq:], ldq, 1, kpanel, nr, sc.s[ir*bk+jp:], bk, opt.Scale, 0)
			}
		}

		for r := range rows {
			f.softmaxStep(sc, r, i0+r, j0, cols, colsPad)
		}

		// acc += P·V for the tile, with P the weights now in S: each tile
		// of queries over the keys up to its last query's frontier. The
		// weights past it are 0; what skipping them leaves out (0 times a
		// NaN or ±Inf value) lastBad puts back.
		for ir, tr := 0, 0; ir < rowsPad; ir += tr {
			tr = f.tileRows(ir, rowsPad)
			depth := min(cols, f.tileEnd(i0, ir, tr, rows)-j0)
			if depth <= 0 {
				continue
			}
			for c := 0; c < f.dvPad; c += nr {
				kern.shortTile(tr, depth, sc.s[ir*bk:], bk, 1, f.vPanel(j0, c), f.vRow, sc.acc[ir*f.dvPad+c:], f.dvPad, 1, 1)
			}
		}
	}

	for ir, tr := 0, 0; ir < rowsPad; ir += tr {
		tr = f.tileRows(ir, rowsPad)
		f.finish(sc, i0, ir, min(ir+tr, rows), f.tileEnd(i0, ir, tr, rows))
	}
}

// finish writes the output rows r0..r1−1 of the block at query i0 from
// the accumulator: rows of one tile, which multiplied the keys up to end
// by V.
func (f *flash) finish(sc *attnScratch, i0, r0, r1, end int) {
	h, opt := &f.h, &f.opt
	for r := r0; r < r1; r++ {
		out := h.Out[(i0+r)*h.LdOut : (i0+r)*h.LdOut+h.Dv]
		acc := sc.acc[r*f.dvPad : r*f.dvPad+h.Dv]
		switch {
		case h.sinkPoisons():
			fillNaN(out)
		case sc.empty[r] && opt.EmptyRowsNaN && !h.sinkFinite() && h.Tk > 0:
			fillNaN(out) // (with no keys at all, weights·V is an empty sum: 0)
		case sc.empty[r] || opt.Dropout >= 1:
			// Every weight is 0 (or the sink has them all): acc holds their
			// products with V, which are 0 or, where a value is not
			// finite, NaN.
			copy(out, acc)
		case math.IsInf(float64(sc.m[r]), -1):
			fillNaN(out) // every visible score is −Inf: softmax is NaN
		default:
			norm := f.keep / sc.l[r]
			for c, v := range acc {
				out[c] = v * norm
			}
		}
		for c, last := range f.lastBad {
			if last >= end {
				out[c] = float32(math.NaN())
			}
		}
	}
}

// tileRows returns how many rows the tile at row ir of a block of rows
// rows (padded ones included) takes: mr, or fewer for the last ones on
// the few-rows kernel, which reads them in place and wastes no work on
// padding (one token of decoding is 1 row of 12).
func (f *flash) tileRows(ir, rows int) int {
	if f.kern.rows == nil {
		return f.kern.mr
	}
	return shortTileRows(rows-ir, f.kern.mr)
}

// tileEnd returns the end of the keys the tile of tr queries at row ir
// of the block at query i0 (of rows queries) sees: the causal frontier of
// its last query, or Tk without a causal mask.
func (f *flash) tileEnd(i0, ir, tr, rows int) int {
	last := i0 + min(ir+tr, rows) - 1
	return visibleKeys(last, f.h.Tq, f.h.Tk, f.opt.Causal)
}

// lastNonFinite returns, for each of the dv columns of the rows from..to−1
// of v (row stride ldv), the last row holding NaN or ±Inf there, or −1.
// It returns nil if there is none at all; buf is reused for the result.
func lastNonFinite(buf *[]int, v []float32, ldv, from, to, dv int) []int {
	var last []int
	for j := from; j < to; j++ {
		for c, x := range v[j*ldv : j*ldv+dv] {
			if isFinite(x) {
				continue
			}
			if last == nil {
				if cap(*buf) < dv {
					*buf = make([]int, dv)
				}
				last = (*buf)[:dv]
				for k := range last {
					last[k] = -1
				}
			}
			last[c] = j
		}
	}
	return last
}

// softmaxStep folds row r (query i) of the score tile starting at key j0
// into the running softmax and leaves the row's unnormalized weights
// exp(s − m) in the tile, zero where hidden or dropped.
//
// NaN needs no case of its own: a NaN score makes the maximum NaN (maxOf
// and max keep it), then every weight, the sum and the rescaled
// accumulator NaN, and they stay NaN for the later tiles. A +Inf score
// makes the maximum +Inf and its own weight e^(Inf−Inf), NaN.
func (f *flash) softmaxStep(sc *attnScratch, r, i, j0, cols, colsPad int) {
	h, set := &f.h, f.set
	srow := sc.s[r*f.bk : r*f.bk+colsPad]
	n := min(cols, visibleKeys(i, h.Tq, h.Tk, f.opt.Causal)-j0)
	if n <= 0 || sc.empty[r] {
		clear(srow) // weights of 0, whatever the scores
		return
	}
	x := srow[:n]
	clear(srow[n:])
	if mask := h.maskRow(i); mask != nil {
		set.add(x, mask[j0:j0+n])
	}
	mOld := sc.m[r]
	mNew := max(mOld, set.maxOf(x))
	if math.IsInf(float64(mNew), -1) {
		clear(x) // every score so far is −Inf: weights of 0 for now
		return
	}
	sum := set.expShift(x, mNew)
	if mNew != mOld { // also when either is NaN
		// 0 on the first tile with a score above −Inf; what acc holds
		// then is 0 or NaN (zero weights times V) and stays so.
		corr := exp32(mOld - mNew)
		sc.l[r] *= corr
		set.scale(sc.acc[r*f.dvPad:(r+1)*f.dvPad], corr)
		sc.m[r] = mNew
	}
	sc.l[r] += sum
	if f.opt.Dropout > 0 {
		words := ceilDiv(h.Tk, 64)
		bits := sc.drop[r*words : (r+1)*words]
		for j := range x {
			k := j0 + j
			if bits[k/64]&(1<<(k%64)) != 0 {
				x[j] *= 0 // a NaN weight stays NaN, as PyTorch's dropout multiplies
			}
		}
	}
}

// drawDropout draws the dropout decisions of the block's rows for all Tk
// keys, in row-major order, as the reference does (masked keys included,
// so the stream does not depend on the mask or the tiling).
func (f *flash) drawDropout(sc *attnScratch, rows int) {
	words := ceilDiv(f.h.Tk, 64)
	if cap(sc.drop) < rows*words {
		sc.drop = make([]uint64, rows*words)
	}
	sc.drop = sc.drop[:rows*words]
	clear(sc.drop)
	p, rng := f.opt.Dropout, f.opt.RNG
	for r := range rows {
		bits := sc.drop[r*words : (r+1)*words]
		for k := range f.h.Tk {
			if rng.Float32() < p {
				bits[k/64] |= 1 << (k % 64)
			}
		}
	}
}

// batchJob runs whole heads of an AttendBatch as parts, each on one
// goroutine with a workspace of its own.
type batchJob struct {
	heads []Head
	opt   AttentionOptions
}

// runPart computes head i.
func (j *batchJob) runPart(i int) {
	ws := freeWorkspaces.get()
	defer freeWorkspaces.put(ws)
	h := &j.heads[i]
	if fewQueries(currentISA(), h, &j.opt) {
		attendFew(h, &j.opt, ws)
		return
	}
	var f flash
	f.setup(h, &j.opt, ws)
	for b := range f.blocks {
		f.block(ws, b)
	}
}

// Free lists of jobs, so that steady-state calls do not allocate.
var (
	freeFlashJobs = make(freeList[flashJob], 16)
	freeBatchJobs = make(freeList[batchJob], 16)
)
