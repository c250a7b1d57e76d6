package registry

import "gorgonia.org/tensor"

// Incremental decoding.
//
// A model runs incrementally when it is fed the tokens of its sequences a
// few at a time (one token, or a chunk) and must produce, for each new
// token, the output the full-sequence Forward would give at that position.
// Causal attention makes this possible: token t depends only on tokens ≤ t,
// so a layer can keep what it needs of the past (the keys and values it
// projected, a position counter, a running sum) in a State and compute only
// the new rows.
//
// Every layer of a model that runs incrementally is one of:
//   - a Stepper: it keeps a State per decoding session (attention with a
//     KV cache, position layers that need the position offset);
//   - TokenWise: its output at a token depends only on its inputs at that
//     token (norms, MLPs, linear maps, residual adds, dropout), so Forward on
//     the new tokens is already the incremental step.
//
// A layer that is neither (non-causal self-attention, whose past outputs
// change when a token arrives) cannot run incrementally.

// State is what one Stepper layer remembers between the steps of one
// decoding session: the cached keys and values of an attention layer, or
// the position offset of a position layer. A State belongs to one session
// and is not safe for concurrent use; the layer itself stays unmodified, so
// one layer serves many sessions, each with its own States.
type State interface {
	// Tokens reports how many tokens of each sequence the layer has
	// consumed so far: the position the next token will take.
	Tokens() int
}

// Stepper is a layer that can run incrementally.
//
// Step takes the same inputs as Forward, in the same order, except that the
// token stream (the first input, (T, d) or (B, T, d)) holds only the n new
// tokens of each sequence; it returns the n new output rows, shaped as
// Forward would shape them, and advances state by n. Inputs that are not
// token streams keep their Forward meaning: a cross-attention memory is
// passed whole at every step; an attention mask covers the n new queries
// against every key so far, (…, n, Tokens()+n). The batch size is fixed
// by the first step.
//
// The contract is exactness: feeding a sequence in any split (token by
// token, or in chunks) gives the rows Forward gives for the whole sequence,
// up to float32 rounding. Train-mode dropout draws from the run's RNG in
// step order, so it matches Forward in distribution only.
type Stepper interface {
	Layer
	// NewState returns the empty state of a new decoding session. It is
	// called after a successful Validate.
	NewState() State
	// Step runs the layer on the next tokens and updates state, which must
	// come from this layer's NewState. On error, state is left unchanged.
	Step(run *Run, state State, inputs []*tensor.Dense) (*tensor.Dense, error)
}

// TokenWise is implemented by layers whose output at each token depends
// only on their inputs at that token: run incrementally, they see just the
// new tokens through Forward and need no state.
type TokenWise interface {
	Layer
	// TokenWise marks the layer as token-wise; it is never called.
	TokenWise()
}
