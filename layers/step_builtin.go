package layers

import (
	"errors"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Incremental steps of the layers of the seed notebooks. The causal
// attention layers keep a KV cache (attentionState); position.learned and
// attention.average keep what they need of the past; the nn.* layers are
// token-wise.

var (
	_ registry.Stepper = (*Causal)(nil)
	_ registry.Stepper = (*MultiHeadWrapper)(nil)
	_ registry.Stepper = (*MultiHead)(nil)
	_ registry.Stepper = (*Average)(nil)
	_ registry.Stepper = (*LearnedPosition)(nil)

	_ registry.TokenWise = (*Linear)(nil)
	_ registry.TokenWise = (*Add)(nil)
	_ registry.TokenWise = (*Concat)(nil)
	_ registry.TokenWise = (*Dropout)(nil)
)

// TokenWise marks nn.linear as token-wise for incremental decoding.
func (l *Linear) TokenWise() {}

// TokenWise marks nn.add as token-wise for incremental decoding.
func (a *Add) TokenWise() {}

// TokenWise marks nn.concat as token-wise for incremental decoding.
func (c *Concat) TokenWise() {}

// TokenWise marks nn.dropout as token-wise for incremental decoding.
func (d *Dropout) TokenWise() {}

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
	q, k, v := p.project(x.data, x.rows())
	past := cache.len()
	weights, err := newStepWeights(run, x.B, heads, x.T, past+x.T)
	if err != nil {
		return nil, err
	}
	cache.appendRows(k, v, x.T)
	hd := p.out / heads
	a := attention{
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
	st, err := attentionStateOf(state, in.B)
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

// NewState starts a decoding session with an empty KV cache.
func (c *Causal) NewState() registry.State { return &attentionState{} }

// Step attends the new tokens to every token so far; the session may not
// grow past context_length.
func (c *Causal) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if c.head == nil {
		return nil, errNotValidated
	}
	h := c.head
	in, st, err := stepStart(state, inputs, h.proj.in, h.contextLength, 1, h.proj.out)
	if err != nil {
		return nil, err
	}
	out, data := in.newOutput(h.proj.out)
	w, err := causalStep(run, in, h.proj, st.caches[0], 1, h.scale, h.dropout, data, h.proj.out)
	if err != nil {
		return nil, err
	}
	st.seqs, st.tokens = in.B, st.tokens+in.T
	observe(run, asWeights(w, in.B, 1, in.T, st.tokens))
	return out, nil
}

// NewState starts a decoding session with an empty KV cache per head.
func (m *MultiHeadWrapper) NewState() registry.State { return &attentionState{} }

// Step runs every head's step, each with its own cache; the session may
// not grow past context_length.
func (m *MultiHeadWrapper) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if m.heads == nil {
		return nil, errNotValidated
	}
	first := m.heads[0]
	in, st, err := stepStart(state, inputs, first.proj.in, first.contextLength, len(m.heads), first.proj.out)
	if err != nil {
		return nil, err
	}
	dOut := first.proj.out
	width := len(m.heads) * dOut
	out, data := in.newOutput(width)
	total := st.tokens + in.T
	weights, err := newStepWeights(run, in.B, len(m.heads), in.T, total)
	if err != nil {
		return nil, err
	}
	all := weightData(weights)
	for i, h := range m.heads {
		w, err := causalStep(run, in, h.proj, st.caches[i], 1, h.scale, h.dropout, data[i*dOut:], width)
		if err != nil {
			return nil, err
		}
		if all != nil {
			n := in.T * total
			for b := range in.B {
				copy(all[(b*len(m.heads)+i)*n:], w[b*n:(b+1)*n])
			}
		}
	}
	st.seqs, st.tokens = in.B, total
	observe(run, weights)
	return out, nil
}

// NewState starts a decoding session with an empty KV cache.
func (m *MultiHead) NewState() registry.State { return &attentionState{} }

// Step attends the new tokens to every token so far and projects the heads
// with out_proj; the layer must be causal, and the session may not grow
// past context_length.
func (m *MultiHead) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if m.outProj == nil {
		return nil, errNotValidated
	}
	if !m.causal {
		return nil, errors.New("a step of non-causal attention would see future tokens: only causal: true runs incrementally")
	}
	in, st, err := stepStart(state, inputs, m.proj.in, m.contextLength, 1, m.proj.out)
	if err != nil {
		return nil, err
	}
	dOut := m.proj.out
	context := make([]float32, in.rows()*dOut)
	w, err := causalStep(run, in, m.proj, st.caches[0], m.numHeads, invSqrt(dOut/m.numHeads), m.dropout, context, dOut)
	if err != nil {
		return nil, err
	}
	out, data := in.newOutput(dOut)
	m.outProj.apply(data, context, in.rows())
	st.seqs, st.tokens = in.B, st.tokens+in.T
	observe(run, asWeights(w, in.B, m.numHeads, in.T, st.tokens))
	return out, nil
}

// asWeights wraps step weights as a (B, H, T, Tk) tensor, or nil.
func asWeights(w []float32, b, h, t, tk int) *tensor.Dense {
	if w == nil {
		return nil
	}
	return tensor.New(tensor.WithShape(b, h, t, tk), tensor.WithBacking(w))
}

// averageState is attention.average's memory: the running sum of every
// sequence's tokens.
type averageState struct {
	tokens int
	seqs   int
	sums   []float32 // B·d
}

// Tokens reports how many tokens of each sequence the layer has seen.
func (s *averageState) Tokens() int { return s.tokens }

// NewState starts a session with empty sums.
func (a *Average) NewState() registry.State { return &averageState{} }

// Step returns the running means at the new tokens.
func (a *Average) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := singleInput(inputs)
	if err != nil {
		return nil, err
	}
	st, ok := state.(*averageState)
	switch {
	case !ok || st == nil:
		return nil, errors.New("state is not from attention.average's NewState")
	case st.seqs != 0 && (st.seqs != in.B || len(st.sums) != in.B*in.D):
		return nil, errors.New("step's batch size or width differs from the session's first step")
	}
	total := st.tokens + in.T
	weights, err := newStepWeights(run, in.B, 1, in.T, total)
	if err != nil {
		return nil, err
	}
	if st.sums == nil {
		st.sums = make([]float32, in.B*in.D)
	}
	out, data := in.newOutput(in.D)
	runningMeans(in, st.tokens, st.sums, data, weightData(weights))
	st.seqs, st.tokens = in.B, total
	observe(run, weights)
	return out, nil
}

// NewState starts a session at position 0.
func (p *LearnedPosition) NewState() registry.State { return &positionState{} }

// Step adds the embeddings of the new tokens' positions; the session may
// not grow past context_length.
func (p *LearnedPosition) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if p.weight == nil {
		return nil, errNotValidated
	}
	if len(inputs) == 2 { // the new tokens' position_ids
		return p.stepAt(state, inputs)
	}
	return positionStep(state, inputs, p.add)
}
