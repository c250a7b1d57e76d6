package layers

import (
	"math"
	"math/rand/v2"

	"github.com/attnrun/attnrun/internal/attn"
	"github.com/attnrun/attnrun/internal/kernels"
)

// maxHeads bounds a head count read from a config before anything is
// allocated per head.
const maxHeads = 1 << 16

// attention is one multi-head attention computation in its most general
// form, shared by attention.sdpa, attention.torch_mha and the incremental
// steps of every attention layer: B sequences of Tq queries against Tk keys
// each, with more query heads than key/value heads allowed (grouped-query
// attention), and every score rule of scoreRule.
//
// Nothing is copied: each (sequence, head) pair is a strided kernels.Head
// view. Query head h reads KV head ⌊h / (qHeads/kvHeads)⌋.
type attention struct {
	seqs, tq, tk    int
	qHeads, kvHeads int
	dk, dv          int
	// q holds the queries: row b·tq+i, query head h at column h·dk.
	q   []float32
	ldq int
	// keys[b] and values[b] hold sequence b's keys and values: row j, KV
	// head g at column g·dk (keys) or g·dv (values).
	keys, values [][]float32
	ldk, ldv     int
	// out receives the context vectors: row b·tq+i, head h at column h·dv.
	out   []float32
	ldOut int
	rule  scoreRule

	bias, scratch []float32 // runGeneral's, for every head: carved off its scratch
}

// scoreRule is what happens between QKᵀ and the product with V:
//
//	s = scale·q·k                        scaled dot product
//	s = softcap·tanh(s / softcap)        if softcap > 0
//	s = mod(s, b, h, i, j)               each score modification
//	s = s + bias                         causal, window, ALiBi and masks
//	w = dropout(softmax(s))              with the head's sink, if any
//
// Positions are absolute: query i sits at qPos+i and key j at kPos+j, which
// is how one rule serves a full pass (qPos = Tk−Tq for bottom-right causal
// alignment, 0 for top-left) and an incremental step (qPos = the tokens
// already seen, kPos = the first key still cached).
//
// NaN and ±Inf: a key the causal frontier, the window or a bool mask hides
// has its score replaced by −Inf, whatever it was (masked_fill, as the
// seed modules and attention.sdpa's reference do), unless addsHidden; so
// has a key a score modification hides (see ScoreMod); a float mask and
// ALiBi are added. See kernels.Attend for the rest.
type scoreRule struct {
	scale   float32
	softcap float32
	// causal hides keys after the query's position.
	causal bool
	// window > 0 hides keys window or more positions before the query:
	// a query sees at most window keys, itself included. Without causal
	// the window is centred: it hides keys more than (window − 1)/2
	// positions away on either side.
	window     int
	qPos, kPos int
	// slopes, if set, adds the ALiBi bias slopes[h]·(key − query position).
	slopes []float32
	// masks are added too; their key axis is absolute: key j reads column
	// kPos+j.
	masks []attn.Mask
	// nanRows makes a query that sees no key output NaN (as
	// nn.MultiheadAttention does) instead of zeros.
	nanRows bool
	// addsHidden adds −Inf to the scores of hidden keys instead of
	// replacing them, as nn.MultiheadAttention, which turns its bool masks
	// into −Inf and adds them: a NaN or +Inf score that a mask hides still
	// makes its query's row NaN.
	addsHidden bool
	dropout    float32
	rng        *rand.Rand
	// sinks, if set, holds each query head's sink logit (kernels.Head.Sink).
	sinks []float32
	// mods are the score modifications; they see query i as index
	// qIndex+i of its sequence and key j as kPos+j.
	mods   []ScoreMod
	qIndex int
}

// plainCausal reports whether the rule is what kernels.Attend does by
// itself: at most a causal mask aligned bottom-right, nothing else. (The
// kernel's frontier replaces scores; with addsHidden the rule has no
// causal frontier of its own, only masks.)
func (r *scoreRule) plainCausal(tq, tk int) bool {
	return r.softcap == 0 && r.window == 0 && r.slopes == nil && len(r.masks) == 0 && len(r.mods) == 0 &&
		(!r.causal || r.qPos == r.kPos+tk-tq)
}

// run computes the attention and writes the weights, if weights is
// non-nil, as (B, qHeads, Tq, kPos+Tk), the columns of keys before kPos
// left zero. Heads run sequence by sequence, head by head, so dropout masks
// are reproducible for a seed.
func (a *attention) run(weights []float32) {
	if a.rule.plainCausal(a.tq, a.tk) && a.rule.kPos == 0 {
		a.runFused(weights)
		return
	}
	a.runGeneral(weights)
}

// head is the kernels.Head view of query head h of sequence b, with the
// head's sink.
func (a *attention) head(b, h int) kernels.Head {
	g := attn.KVHead(h, a.qHeads, a.kvHeads)
	row := b * a.tq
	hd := kernels.Head{
		Q: a.q[row*a.ldq+h*a.dk:], LdQ: a.ldq,
		K: a.keys[b][g*a.dk:], LdK: a.ldk,
		V: a.values[b][g*a.dv:], LdV: a.ldv,
		Out: a.out[row*a.ldOut+h*a.dv:], LdOut: a.ldOut,
		Tq: a.tq, Tk: a.tk, D: a.dk, Dv: a.dv,
	}
	if a.rule.sinks != nil {
		hd.Sink = &a.rule.sinks[h]
	}
	return hd
}

// runFused hands every head to the fused kernel at once, which spreads them
// over the processors; the weights of head (b, h) are block b·H+h of
// weights, as AttendBatch writes them.
func (a *attention) runFused(weights []float32) {
	sc := getScratch(0)
	defer sc.release()
	heads := sc.headViews(a.seqs * a.qHeads)[:0]
	for b := range a.seqs {
		for h := range a.qHeads {
			heads = append(heads, a.head(b, h))
		}
	}
	kernels.AttendBatch(heads, kernels.AttentionOptions{
		Scale: a.rule.scale, Causal: a.rule.causal, EmptyRowsNaN: a.rule.nanRows,
		Dropout: a.rule.dropout, RNG: a.rule.rng, Weights: weights,
	})
}

// runGeneral attends head by head with an additive bias that holds the
// causal mask, the window, ALiBi, the masks and the keys score
// modifications hide, rebuilt only when it differs from the previous
// head's. The kernel adds the bias; where that could differ from hiding by
// replacement (a hidden score that is NaN or +Inf), and for soft-capping
// and score modifications, the sequence takes the exact path.
func (a *attention) runGeneral(weights []float32) {
	if weights == nil && a.runBatched() {
		return
	}
	// The bias, the scores and the head view come from a pooled scratch,
	// so that a pass allocates none of them.
	sc := getScratch(2 * a.tq * a.tk)
	defer sc.release()
	a.bias, a.scratch = sc.floats(a.tq*a.tk), sc.floats(a.tq*a.tk)
	defer func() { a.bias, a.scratch = nil, nil }()
	head := &sc.headViews(1)[0]
	bySeq, byHead := a.rule.biasVaries()
	builtB, builtH := -1, -1
	wCols := a.rule.kPos + a.tk
	for b := range a.seqs {
		exact := a.rule.softcap != 0 || len(a.rule.mods) > 0 || !a.biasHides(b)
		for h := range a.qHeads {
			*head = a.head(b, h)
			bb, bh := b, h
			if !bySeq {
				bb = 0
			}
			if !byHead {
				bh = 0
			}
			if bb != builtB || bh != builtH {
				a.rule.fillBias(a.bias, bb, bh, a.tq, a.tk)
				builtB, builtH = bb, bh
			}
			var w []float32
			if weights != nil {
				w = a.scratch
			}
			if exact {
				a.attendExact(head, b, h, w)
			} else {
				head.Mask, head.LdMask = a.bias, a.tk
				kernels.Attend(*head, kernels.AttentionOptions{
					Scale: a.rule.scale, EmptyRowsNaN: a.rule.nanRows,
					Dropout: a.rule.dropout, RNG: a.rule.rng, Weights: w,
				})
			}
			for i := 0; w != nil && i < a.tq; i++ {
				at := ((b*a.qHeads+h)*a.tq+i)*wCols + a.rule.kPos
				copy(weights[at:at+a.tk], w[i*a.tk:(i+1)*a.tk])
			}
		}
	}
}

// maxBatchedBias bounds, in floats, the biases runBatched builds at once
// (one tq×tk block per sequence and head they differ by: 16 MiB).
const maxBatchedBias = 1 << 22

// runBatched attends every head at once through kernels.AttendBatch, which
// spreads them over the processors, when the fused kernel computes the
// whole rule with an additive bias: no soft-capping, no score
// modifications, and in every sequence the bias hides keys as the rule
// wants (biasHides). Otherwise, or when the biases would take more than
// maxBatchedBias, it does nothing and reports false.
func (a *attention) runBatched() bool {
	r := &a.rule
	if r.softcap != 0 || len(r.mods) > 0 {
		return false
	}
	for b := range a.seqs {
		if !a.biasHides(b) {
			return false
		}
	}
	bySeq, byHead := r.biasVaries()
	seqs, heads := 1, 1
	if bySeq {
		seqs = a.seqs
	}
	if byHead {
		heads = a.qHeads
	}
	block := a.tq * a.tk
	if seqs*heads > maxBatchedBias/max(block, 1) {
		return false
	}
	sc := getScratch(seqs * heads * block)
	defer sc.release()
	biases := sc.floats(seqs * heads * block)
	for b := range seqs {
		for h := range heads {
			at := (b*heads + h) * block
			r.fillBias(biases[at:at+block], b, h, a.tq, a.tk)
		}
	}
	views := sc.headViews(a.seqs * a.qHeads)
	for b := range a.seqs {
		for h := range a.qHeads {
			bb, bh := min(b, seqs-1), min(h, heads-1)
			at := (bb*heads + bh) * block
			hd := &views[b*a.qHeads+h]
			*hd = a.head(b, h)
			hd.Mask, hd.LdMask = biases[at:at+block], a.tk
		}
	}
	kernels.AttendBatch(views, kernels.AttentionOptions{
		Scale: r.scale, EmptyRowsNaN: r.nanRows, Dropout: r.dropout, RNG: r.rng,
	})
	return true
}

// biasHides reports whether adding the bias hides keys as the rule wants
// in sequence b: the rule adds its masks anyway, or nothing hides a key by
// replacement, or every score is finite (then s + (−Inf) is −Inf).
func (a *attention) biasHides(b int) bool {
	r := &a.rule
	if r.addsHidden || !r.mayHide(a.tq, a.tk) {
		return true
	}
	q := a.q[b*a.tq*a.ldq:]
	q = q[:min(len(q), a.tq*a.ldq)]
	k := a.keys[b][:min(len(a.keys[b]), a.tk*a.ldk)]
	return kernels.FiniteScores(q, k, a.dk, r.scale)
}

// mayHide reports whether the causal frontier, the window or a bool mask
// may hide a key from one of tq queries over tk keys.
func (r *scoreRule) mayHide(tq, tk int) bool {
	bias := r.bias()
	return bias.MayHide(r.qPos, tq, r.kPos, tk)
}

// hides reports whether the causal frontier, the window, a bool mask or a
// score modification hides key j from query i of sequence b, head h.
func (r *scoreRule) hides(b, h, i, j int) bool {
	bias, kp := r.bias(), r.kPos+j
	return bias.Hides(b, h, i, r.qPos+i, kp) || len(r.mods) > 0 && scoreModsHide(r.mods, b, h, r.qIndex+i, kp)
}

// bias is the rule's additive bias but for the score modifications: the
// causal frontier and window (a window of w keys sees the query and the
// w−1 keys before it), ALiBi and the masks.
func (r *scoreRule) bias() attn.Bias {
	f := attn.Frontier{Causal: r.causal, Left: -1, Right: -1}
	switch {
	case r.window > 0 && r.causal:
		f.Left = r.window - 1
	case r.window > 0: // centred on the query
		f.Left, f.Right = (r.window-1)/2, (r.window-1)/2
	}
	return attn.Bias{Frontier: f, Slopes: r.slopes, Masks: r.masks}
}

// biasVaries reports whether the additive bias differs between sequences
// and between heads; when it does not, one bias serves them all.
func (r *scoreRule) biasVaries() (bySeq, byHead bool) {
	if len(r.mods) > 0 {
		return true, true // what a modification hides may depend on both
	}
	bias := r.bias()
	return bias.Varies()
}

// fillBias writes the tq×tk additive bias of sequence b, head h into buf:
// −Inf where the causal mask, the window or a score modification hides a
// key, otherwise the ALiBi term plus the masks.
func (r *scoreRule) fillBias(buf []float32, b, h, tq, tk int) []float32 {
	bias := r.bias()
	var modded []float32
	if len(r.mods) > 0 {
		modded = make([]float32, tk)
	}
	for i := range tq {
		row := buf[i*tk : (i+1)*tk]
		bias.Row(row, b, h, i, r.qPos+i, r.kPos)
		if modded != nil { // what the modifications make of a score of 0
			clear(modded)
			for _, m := range r.mods {
				m.Modify(modded, b, h, r.qIndex+i, r.kPos)
			}
			for j, v := range modded {
				if math.IsInf(float64(v), -1) {
					row[j] = negInf
				}
			}
		}
	}
	return buf
}

// attendExact computes one head (sequence b, head h) step by step with
// attn.Exact, for what the fused kernel does not do: logit soft-capping,
// score modifications, and hiding keys by replacement when a hidden score
// may be NaN or +Inf. a.bias, built for this head, is the rest of the
// bias; a hidden key's score is replaced by −Inf (or, with addsHidden,
// −Inf is added). A query that sees no key gets weights of 0 unless
// nanRows keeps the softmax's NaN. w, if non-nil, receives the weights.
func (a *attention) attendExact(hd *kernels.Head, b, h int, w []float32) {
	r := &a.rule
	s := w
	if s == nil {
		s = a.scratch
	}
	e := attn.Exact{
		Scale: r.scale, Softcap: r.softcap, Bias: a.bias,
		EmptyRowsNaN: r.nanRows, Dropout: r.dropout, RNG: r.rng,
	}
	if len(r.mods) > 0 {
		e.Modify = func(row []float32, i int) {
			for _, m := range r.mods {
				m.Modify(row, b, h, r.qIndex+i, r.kPos)
			}
		}
	}
	if !r.addsHidden {
		e.Hide = func(row []float32, i int) {
			bias := a.bias[i*hd.Tk : (i+1)*hd.Tk]
			for j := range row {
				if math.IsInf(float64(bias[j]), -1) && r.hides(b, h, i, j) {
					row[j] = negInf
				}
			}
		}
	}
	_ = e.Attend(*hd, s) // without a context, Attend cannot fail
}
