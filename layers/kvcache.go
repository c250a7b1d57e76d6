package layers

import (
	"fmt"
	"slices"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// kvCache holds the keys and values an attention layer has projected so
// far, sequence by sequence, in the layout of the projections themselves:
// row j of keys[b] is key j of sequence b, all KV heads side by side, so a
// head of the cache is a strided kernels.Head view like a head of a fresh
// projection. A step appends rows; nothing is re-laid out.
//
// A sliding-window layer needs only its last window−1 keys for the queries
// to come, and drops the rest: start is then the position of the first key
// still held.
type kvCache struct {
	kWidth, vWidth int
	keys, values   [][]float32
	start          int
	// step is the attention of the current step: kept here, not on the
	// stack, which it would leave for the heap at every step.
	step attention
}

// newKVCache returns an empty cache for seqs sequences with keys and values
// of the given widths (heads × head size).
func newKVCache(seqs, kWidth, vWidth int) *kvCache {
	return &kvCache{
		kWidth: kWidth, vWidth: vWidth,
		keys: make([][]float32, seqs), values: make([][]float32, seqs),
	}
}

// len is the number of keys held per sequence.
func (c *kvCache) len() int { return len(c.keys[0]) / c.kWidth }

// appendRows adds n new keys and values to every sequence, taken from
// projections laid out as rows b·n+t of k (width kWidth) and v (width
// vWidth).
func (c *kvCache) appendRows(k, v []float32, n int) {
	for b := range c.keys {
		c.keys[b] = append(c.keys[b], k[b*n*c.kWidth:(b+1)*n*c.kWidth]...)
		c.values[b] = append(c.values[b], v[b*n*c.vWidth:(b+1)*n*c.vWidth]...)
	}
}

// keepLast drops all but the last n keys and values of every sequence,
// moving them to the front so the storage does not grow without bound.
func (c *kvCache) keepLast(n int) {
	drop := c.len() - n
	if drop <= 0 {
		return
	}
	for b := range c.keys {
		c.keys[b] = append(c.keys[b][:0], c.keys[b][drop*c.kWidth:]...)
		c.values[b] = append(c.values[b][:0], c.values[b][drop*c.vWidth:]...)
	}
	c.start += drop
}

// attentionState is the registry.State of the attention layers: the tokens
// seen, the batch size fixed by the first step, and one KV cache per group
// of heads that share projections (one for attention.multihead and
// attention.sdpa, one per head for attention.multihead_wrapper). A
// cross-attention layer caches the projections of its memory instead, made
// at the first step.
type attentionState struct {
	session
	caches []*kvCache
	// memory holds copies of the cross-attention inputs the caches were
	// projected from (memory; or key and value), to tell when they change.
	memory []*tensor.Dense
	// keepAll keeps every key of a sliding-window layer: a session that
	// resumed from a caller's cache returns the whole cache, as Hugging
	// Face's present does (kvcache_resume.go).
	keepAll bool
	// pending is the step in progress (keySource), kept here so that a
	// step allocates nothing for it.
	pending pendingStep
}

var _ registry.State = (*attentionState)(nil)

// session is what the state of every stepping layer keeps: how many
// tokens of each sequence it has seen, and the batch size, fixed by the
// first step.
type session struct {
	tokens int
	seqs   int // 0 until the first step
}

// Tokens reports how many tokens of each sequence the layer has seen.
func (s *session) Tokens() int { return s.tokens }

// sameSeqs checks that a step of seqs sequences continues the session.
func (s *session) sameSeqs(seqs int) error {
	if s.seqs != 0 && s.seqs != seqs {
		return fmt.Errorf("step has %d sequence(s), the session started with %d", seqs, s.seqs)
	}
	return nil
}

// stateOf checks that a state passed to Step is a *S, from the layer's
// NewState, and that the step's seqs sequences continue its session.
func stateOf[S any, P interface {
	*S
	sameSeqs(int) error
}](state registry.State, seqs int) (P, error) {
	s, ok := state.(P)
	if !ok || s == nil {
		return nil, fmt.Errorf("state %T is not from this layer's NewState", state)
	}
	if err := s.sameSeqs(seqs); err != nil {
		return nil, err
	}
	return s, nil
}

// sameMemory reports whether the cross-attention inputs xs equal, in shape
// and values, those the state's caches were projected from.
func (s *attentionState) sameMemory(xs ...seqs) bool {
	if len(s.memory) != len(xs) {
		return false
	}
	for i, x := range xs {
		if !slices.Equal(floats(s.memory[i]), x.data) || !slices.Equal(s.memory[i].Shape(), x.shape(x.D)) {
			return false
		}
	}
	return true
}

// rememberMemory keeps copies of the cross-attention inputs xs, whose
// projections the caches now hold.
func (s *attentionState) rememberMemory(xs ...seqs) {
	s.memory = s.memory[:0]
	for _, x := range xs {
		s.memory = append(s.memory, tensor.New(tensor.WithShape(x.shape(x.D)...), tensor.WithBacking(slices.Clone(x.data))))
	}
}

// positionState is the registry.State of layers that only need to know
// where the new tokens sit: the position layers.
type positionState struct{ session }

var _ registry.State = (*positionState)(nil)

// advance records n more tokens of seqs sequences.
func (s *positionState) advance(seqs, n int) { s.seqs, s.tokens = seqs, s.tokens+n }

// positionStep is the Step of a position layer: it reads the one input,
// checks it against the session, has at compute the output for the new
// tokens, which sit at positions pos0, pos0+1, ..., and advances the
// session past them once at has succeeded.
func positionStep(run *registry.Run, state registry.State, inputs []*tensor.Dense, at func(run *registry.Run, in seqs, pos0 int) (*tensor.Dense, error)) (*tensor.Dense, error) {
	in, err := singleInput(inputs)
	if err != nil {
		return nil, err
	}
	s, err := stateOf[positionState](state, in.B)
	if err != nil {
		return nil, err
	}
	out, err := at(run, in, s.tokens)
	if err != nil {
		return nil, err
	}
	s.advance(in.B, in.T)
	return out, nil
}

// newStepWeights allocates the (B, H, Tq, Tk) weights of a step or pass
// when the run has a hook that wants them, or returns nil.
func newStepWeights(run *registry.Run, seqs, heads, tq, tk int) (*tensor.Dense, error) {
	if !run.WantWeights() {
		return nil, nil
	}
	return newZeros("attention weights", seqs, heads, tq, tk)
}

// weightData is the backing array of weights, or nil.
func weightData(weights *tensor.Dense) []float32 {
	if weights == nil {
		return nil
	}
	return floats(weights)
}
