package registry

import "gorgonia.org/tensor"

// Resumer is a Stepper whose decoding session can start after tokens it
// never saw, and whose cache can be read: what a graph with a KV cache
// interface needs (Hugging Face's past_key_values inputs and present
// outputs), where the caller owns the cache between calls.
//
// Keys and values are laid out as Hugging Face's caches hold them, (B,
// KVHeads, T, HeadDim): the keys as the layer attends to them (after its
// RoPE and key norm), the values as projected. A layer that keeps no keys
// (a position layer) takes and returns nil ones.
type Resumer interface {
	Stepper
	// Resume makes state, fresh from NewState, as if its session had
	// consumed tokens tokens of seqs sequences whose keys and values are
	// keys and values (nil for a layer without a cache, or no tokens).
	// The session is the caller's cache: Cache returns all of it, even
	// where a sliding-window layer would drop the keys it no longer needs.
	Resume(state State, seqs, tokens int, keys, values *tensor.Dense) error
	// Cache returns the keys and values state holds, every token so far;
	// nil, nil for a layer without a cache or a session with no tokens.
	Cache(state State) (keys, values *tensor.Dense, err error)
}
