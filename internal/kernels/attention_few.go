package kernels

import "math"

// Attention for a few queries over many keys: a token (or a few) of
// decoding over a KV cache. The fused kernel's tiles would pack the whole
// of K for one or two rows of scores, and packing then costs more than the
// products it feeds. Here K and V are read in place: the scores are dot
// products of each query with four key rows at a time (the rows stay in
// L1 across the queries), each row of scores becomes weights by a plain
// two-pass softmax (all Tk scores of a few rows fit in cache), and the
// weights multiply V with the few-rows micro-kernel, V read row by row.

// maxFewQueries is the most queries a head may have to take attendFew.
const maxFewQueries = 4

// fewKeyBlock is how many keys the queries of a few-queries head pass over
// in turn when computing their scores: 256 keys of up to 128 floats, at
// most 128 KiB, stay in L2 for the next query.
const fewKeyBlock = 256

// fewQueries reports whether head h takes attendFew with set: few queries,
// at least one key, no dropout (whose draws follow the fused kernel's
// blocks), dot products and a few-rows kernel on this instruction set, and
// value rows that are whole panels of the kernel's width (read in place).
func fewQueries(set *isa, h *Head, opt *AttentionOptions) bool {
	kern := set.gemm
	return h.Tq <= maxFewQueries && h.Tk > 0 && opt.Dropout == 0 &&
		set.dot4 != nil && kern.rows != nil && maxFewQueries <= maxTileRows &&
		h.Dv%kern.nr == 0
}

// attendFew computes Attend for a head that fewQueries accepts, on the
// calling goroutine, with ws's buffers. Its NaN and ±Inf rules are those
// of the fused kernel; hidden keys get weights of 0 that still multiply
// their values, so a non-finite value reaches the output as Attend says.
func attendFew(h *Head, opt *AttentionOptions, ws *workspace) {
	set := currentISA()
	kern := set.gemm
	tq, tk := h.Tq, h.Tk
	sc := &ws.attn
	sc.s = grow(sc.s, tq*tk)
	sc.acc = grow(sc.acc, tq*h.Dv)
	sc.m = grow(sc.m, tq)
	sc.l = grow(sc.l, tq)
	if cap(sc.empty) < maxFewQueries {
		sc.empty = make([]bool, maxFewQueries)
	}
	sc.empty = sc.empty[:tq]

	fewScores(set, h, opt.Scale, sc.s, visibleKeys(tq-1, tq, tk, opt.Causal), &ws.dots)
	for i := range tq {
		sc.empty[i] = h.seesNoKey(i, opt.Causal)
		sc.m[i], sc.l[i] = fewWeights(set, h, i, sc.s[i*tk:(i+1)*tk], visibleKeys(i, tq, tk, opt.Causal), sc.empty[i])
	}
	for c := 0; c < h.Dv; c += kern.nr {
		kern.shortTile(tq, tk, sc.s, tk, 1, h.V[c:], h.LdV, sc.acc[c:], h.Dv, 1, 0)
	}

	for i := range tq {
		out := h.Out[i*h.LdOut : i*h.LdOut+h.Dv]
		acc := sc.acc[i*h.Dv : (i+1)*h.Dv]
		switch {
		case h.sinkPoisons():
			fillNaN(out)
		case sc.empty[i] && opt.EmptyRowsNaN && !h.sinkFinite():
			fillNaN(out)
		case sc.empty[i]:
			copy(out, acc) // weights of 0 times V: 0, or NaN under a non-finite value
		case math.IsInf(float64(sc.m[i]), -1):
			fillNaN(out) // every visible score is −Inf: softmax is NaN
		default:
			norm := 1 / sc.l[i]
			for c, v := range acc {
				out[c] = v * norm
			}
		}
	}
}

// fewScores sets s[i·Tk + j] = scale·(q_i·k_j) for the queries of h and
// the keys j < keys, reading Q and K in place.
func fewScores(set *isa, h *Head, scale float32, s []float32, keys int, d *[4]float32) {
	k32 := h.D &^ 31
	j := 0
	if set.dotRows != nil && k32 == h.D {
		// Blocks of keys small enough to stay in cache while every query
		// passes over them, each pass one call.
		for j+4 <= keys {
			n := min(fewKeyBlock, (keys-j)&^3)
			for i := range h.Tq {
				set.dotRows(n/4, h.D, h.Q[i*h.LdQ:], h.K[j*h.LdK:], h.LdK, scale, s[i*h.Tk+j:i*h.Tk+j+n])
			}
			j += n
		}
	}
	for ; j+4 <= keys; j += 4 {
		k := h.K[j*h.LdK:]
		for i := range h.Tq {
			q := h.Q[i*h.LdQ : i*h.LdQ+h.D]
			set.dot4(k32, q, k, h.LdK, d)
			row := s[i*h.Tk+j : i*h.Tk+j+4]
			for r := range row {
				row[r] = scale * (d[r] + dotGo(q[k32:], k[r*h.LdK+k32:]))
			}
		}
	}
	for ; j < keys; j++ {
		k := h.K[j*h.LdK : j*h.LdK+h.D]
		for i := range h.Tq {
			q := h.Q[i*h.LdQ : i*h.LdQ+h.D]
			s[i*h.Tk+j] = scale * (dotGo(q[:k32], k) + dotGo(q[k32:], k[k32:]))
		}
	}
}

// fewWeights turns row, query i's scores of its n visible keys, into its
// unnormalized softmax weights exp(s − m) (0 for the hidden keys and for a
// query that sees no key) and returns the maximum m and the sum of the
// weights, a finite sink's included. A NaN or +Inf score makes m, the
// weights and the sum NaN; scores all −Inf leave m at −Inf.
func fewWeights(set *isa, h *Head, i int, row []float32, n int, empty bool) (m, l float32) {
	clear(row[n:])
	x := row[:n]
	m = float32(math.Inf(-1))
	if empty {
		clear(x)
		return m, 0
	}
	if mask := h.maskRow(i); mask != nil {
		set.add(x, mask[:n])
	}
	if h.sinkFinite() {
		m = *h.Sink
	}
	m = max(m, set.maxOf(x))
	if math.IsInf(float64(m), -1) {
		clear(x)
		return m, 0
	}
	l = set.expShift(x, m)
	if h.sinkFinite() {
		l += exp32(*h.Sink - m)
	}
	return m, l
}
