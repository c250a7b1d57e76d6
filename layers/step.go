package layers

import (
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// The helpers of the causal attention layers' Step methods
// (registry.Stepper): one step over a KV cache, shared by attention.causal,
// attention.multihead_wrapper and attention.multihead.

// causalStep is one step of causal self-attention over heads heads that
// share the projections p: it projects the new tokens of x, appends their
// keys and values to cache, and writes the new context vectors to out (row
// stride ldOut). It returns the weights, (B, heads, T, past+T), if the run
// wants them. The caller has checked everything that can fail.
func causalStep(run *registry.Run, x seqs, p qkv, cache *kvCache, heads int, scale float32, dropout float64, out []float32, ldOut int) ([]float32, error) {
	prob, rng, err := activeDropout(run, "dropout", dropout)
	if err != nil {
		return nil, err
	}
	rows := x.rows()
	sc := getScratch(3 * rows * p.out)
	defer sc.release()
	q, k, v := sc.floats(rows*p.out), sc.floats(rows*p.out), sc.floats(rows*p.out)
	p.projectEach(q, k, v, x.data, rows)
	past := cache.len()
	weights, err := newStepWeights(run, x.B, heads, x.T, past+x.T)
	if err != nil {
		return nil, err
	}
	cache.appendRows(k, v, x.T)
	hd := p.out / heads
	a := &cache.step
	defer func() { *a = attention{} }() // keep no buffers of the step
	*a = attention{
		seqs: x.B, tq: x.T, tk: past + x.T, qHeads: heads, kvHeads: heads, dk: hd, dv: hd,
		q: q, ldq: p.out, keys: cache.keys, values: cache.values, ldk: p.out, ldv: p.out,
		out: out, ldOut: ldOut,
		rule: scoreRule{scale: scale, causal: true, qPos: past, nanRows: true, dropout: prob, rng: rng},
	}
	w := weightData(weights)
	a.run(w)
	return w, nil
}

// stepStart checks the state and the new tokens of a causal attention
// layer's step against its context length (0: none), and makes its
// caches, count of them, of keys and values width wide, on the first step.
func stepStart(state registry.State, inputs []*tensor.Dense, dIn, contextLength, count, width int) (seqs, *attentionState, error) {
	in, err := singleInput(inputs)
	if err != nil {
		return in, nil, err
	}
	if err := in.expectWidth("d_in", dIn); err != nil {
		return in, nil, err
	}
	st, err := stateOf[attentionState](state, in.B)
	if err != nil {
		return in, nil, err
	}
	if contextLength > 0 {
		if err := checkContext(st.tokens+in.T, contextLength); err != nil {
			return in, nil, err
		}
	}
	if st.seqs == 0 { // no step has succeeded yet: start with empty caches for this batch
		st.caches = nil
		for range count {
			st.caches = append(st.caches, newKVCache(in.B, width, width))
		}
	}
	return in, st, nil
}

// asWeights wraps step weights as a (B, H, T, Tk) tensor, or nil.
func asWeights(w []float32, b, h, t, tk int) *tensor.Dense {
	if w == nil {
		return nil
	}
	return tensor.New(tensor.WithShape(b, h, t, tk), tensor.WithBacking(w))
}
