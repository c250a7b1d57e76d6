package layers

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// Sessions that start from a cache the caller holds (registry.Resumer):
// a graph with Hugging Face's past_key_values inputs and present outputs,
// run by attnrun layers, passes its cache in and out at every call.

var (
	_ registry.Resumer = (*SDPA)(nil)
	_ registry.Resumer = (*MultiHead)(nil)
	_ registry.Resumer = (*LearnedPosition)(nil)
	_ registry.Resumer = (*RoPE)(nil)
	_ registry.Resumer = (*SinusoidalPosition)(nil)
	_ registry.Resumer = (*ALiBi)(nil)
)

// Resume starts a session after tokens tokens whose keys and values,
// (B, num_kv_heads, tokens, head_dim), are the layer's: keys rotated and
// normalized as the layer caches them. A sliding-window layer keeps every
// key of a resumed session (attending to its window only), so that Cache
// returns the whole cache, as Hugging Face's present holds it.
func (s *SDPA) Resume(state registry.State, seqs, tokens int, keys, values *tensor.Dense) error {
	if s.c == nil {
		return errNotValidated
	}
	return resumeKV(state, seqs, tokens, keys, values, s.c.kvHeads, s.c.headDim)
}

// Cache returns the keys and values of every token of the session,
// (B, num_kv_heads, T, head_dim). A sliding-window layer that has dropped
// keys outside its window cannot return them.
func (s *SDPA) Cache(state registry.State) (keys, values *tensor.Dense, err error) {
	if s.c == nil {
		return nil, nil, errNotValidated
	}
	return cacheKV(state, s.c.kvHeads, s.c.headDim, s.c.window)
}

// Resume starts a session after tokens tokens whose keys and values are
// (B, num_heads, tokens, d_out/num_heads).
func (m *MultiHead) Resume(state registry.State, seqs, tokens int, keys, values *tensor.Dense) error {
	if m.numHeads == 0 {
		return errNotValidated
	}
	return resumeKV(state, seqs, tokens, keys, values, m.numHeads, m.proj.out/m.numHeads)
}

// Cache returns the keys and values of every token of the session,
// (B, num_heads, T, d_out/num_heads).
func (m *MultiHead) Cache(state registry.State) (keys, values *tensor.Dense, err error) {
	if m.numHeads == 0 {
		return nil, nil, errNotValidated
	}
	return cacheKV(state, m.numHeads, m.proj.out/m.numHeads, 0)
}

// resumeKV starts an attention session with one cache of heads heads of
// headDim after tokens tokens (see registry.Resumer), keeping every key;
// with no tokens, keys and values are nil and the cache starts empty.
func resumeKV(state registry.State, seqs, tokens int, keys, values *tensor.Dense, heads, headDim int) error {
	st, err := stateOf[attentionState](state, seqs)
	if err != nil {
		return err
	}
	if st.tokens != 0 {
		return fmt.Errorf("resume needs a new session, this one has %d token(s)", st.tokens)
	}
	st.keepAll = true
	if tokens == 0 {
		if keys != nil || values != nil {
			return fmt.Errorf("a session of no tokens takes no keys or values")
		}
		return nil
	}
	want := []int{seqs, heads, tokens, headDim}
	k, err := headsToRows("keys", keys, want)
	if err != nil {
		return err
	}
	v, err := headsToRows("values", values, want)
	if err != nil {
		return err
	}
	width := heads * headDim
	cache := newKVCache(seqs, width, width)
	cache.appendRows(k, v, tokens)
	st.seqs, st.tokens, st.caches = seqs, tokens, []*kvCache{cache}
	return nil
}

// cacheKV returns the keys and values of an attention session with one
// cache of heads heads of headDim, (B, heads, T, headDim).
func cacheKV(state registry.State, heads, headDim, window int) (keys, values *tensor.Dense, err error) {
	st, ok := state.(*attentionState)
	if !ok || st == nil {
		return nil, nil, fmt.Errorf("state %T is not from this layer's NewState", state)
	}
	if st.seqs == 0 || len(st.caches) != 1 || st.caches[0].len() == 0 {
		return nil, nil, nil
	}
	cache := st.caches[0]
	if cache.start > 0 {
		return nil, nil, fmt.Errorf("the layer keeps the last %d keys of its window (window %d), not the %d of the session", cache.len(), window, st.tokens)
	}
	return rowsToHeads(cache.keys, heads, headDim), rowsToHeads(cache.values, heads, headDim), nil
}

// headsToRows reads a (B, H, T, hd) cache tensor of the wanted shape into
// rows b·T+t of H·hd numbers, the layout of the layers' projections.
func headsToRows(what string, t *tensor.Dense, want []int) ([]float32, error) {
	if t == nil {
		return nil, fmt.Errorf("%s: missing, want shape %s", what, fmtShape(want))
	}
	shape := []int(t.Shape())
	if len(shape) != 4 || shape[0] != want[0] || shape[1] != want[1] || shape[2] != want[2] || shape[3] != want[3] {
		return nil, fmt.Errorf("%s: shape %s, want (B, num_kv_heads, T, head_dim) %s", what, fmtShape(shape), fmtShape(want))
	}
	src, ok := t.Data().([]float32)
	if !ok {
		return nil, fmt.Errorf("%s: %v, want float32", what, t.Dtype())
	}
	B, H, T, hd := want[0], want[1], want[2], want[3]
	rows := make([]float32, len(src))
	for b := range B {
		for h := range H {
			for i := range T {
				copy(rows[((b*T+i)*H+h)*hd:][:hd], src[((b*H+h)*T+i)*hd:][:hd])
			}
		}
	}
	return rows, nil
}

// rowsToHeads lays the per-sequence rows of a cache (T rows of H·hd each)
// out as a (B, H, T, hd) tensor.
func rowsToHeads(seqRows [][]float32, H, hd int) *tensor.Dense {
	B, T := len(seqRows), len(seqRows[0])/(H*hd)
	out := make([]float32, B*H*T*hd)
	for b, rows := range seqRows {
		for i := range T {
			for h := range H {
				copy(out[((b*H+h)*T+i)*hd:][:hd], rows[(i*H+h)*hd:][:hd])
			}
		}
	}
	return tensor.New(tensor.WithShape(B, H, T, hd), tensor.WithBacking(out))
}

// resumePosition starts a position layer's session after tokens tokens:
// such a layer keeps no keys.
func resumePosition(state registry.State, seqs, tokens int, keys, values *tensor.Dense) error {
	s, err := stateOf[positionState](state, seqs)
	if err != nil {
		return err
	}
	if keys != nil || values != nil {
		return fmt.Errorf("a position layer keeps no keys or values")
	}
	if s.tokens != 0 {
		return fmt.Errorf("resume needs a new session, this one has %d token(s)", s.tokens)
	}
	if tokens > 0 {
		s.seqs, s.tokens = seqs, tokens
	}
	return nil
}

// Resume starts a session after tokens tokens (see registry.Resumer).
func (p *LearnedPosition) Resume(state registry.State, seqs, tokens int, keys, values *tensor.Dense) error {
	return resumePosition(state, seqs, tokens, keys, values)
}

// Cache returns nothing: a position layer keeps no keys.
func (p *LearnedPosition) Cache(registry.State) (keys, values *tensor.Dense, err error) {
	return nil, nil, nil
}

// Resume starts a session after tokens tokens (see registry.Resumer).
func (r *RoPE) Resume(state registry.State, seqs, tokens int, keys, values *tensor.Dense) error {
	return resumePosition(state, seqs, tokens, keys, values)
}

// Cache returns nothing: a position layer keeps no keys.
func (r *RoPE) Cache(registry.State) (keys, values *tensor.Dense, err error) { return nil, nil, nil }

// Resume starts a session after tokens tokens (see registry.Resumer).
func (p *SinusoidalPosition) Resume(state registry.State, seqs, tokens int, keys, values *tensor.Dense) error {
	return resumePosition(state, seqs, tokens, keys, values)
}

// Cache returns nothing: a position layer keeps no keys.
func (p *SinusoidalPosition) Cache(registry.State) (keys, values *tensor.Dense, err error) {
	return nil, nil, nil
}

// Resume starts a session after tokens tokens (see registry.Resumer).
func (a *ALiBi) Resume(state registry.State, seqs, tokens int, keys, values *tensor.Dense) error {
	return resumePosition(state, seqs, tokens, keys, values)
}

// Cache returns nothing: a position layer keeps no keys.
func (a *ALiBi) Cache(registry.State) (keys, values *tensor.Dense, err error) { return nil, nil, nil }
