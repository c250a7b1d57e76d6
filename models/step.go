package models

import (
	"errors"
	"fmt"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// State is a model's memory between the incremental steps of one decoding
// session: the state of each of its Stepper layers. Make one with
// Model.NewState for each session; a State is not safe for concurrent use,
// but sessions of one Model may run concurrently.
type State struct {
	model  *Model
	layers []registry.State // nil entries for token-wise layers
	tokens int
	// broken is the error of a failed step: some layers may have advanced
	// and others not, so the session cannot go on.
	broken error
}

// Tokens reports how many tokens of each sequence the session has consumed.
func (s *State) Tokens() int { return s.tokens }

// CheckIncremental reports whether every layer of the model can run
// incrementally, and if not, which cannot.
func (m *Model) CheckIncremental() error {
	for _, st := range m.steps {
		switch st.spec.Layer.(type) {
		case registry.Stepper, registry.TokenWise:
		default:
			return fmt.Errorf("model %q: layer %q (%s) cannot run incrementally: it is neither a registry.Stepper nor registry.TokenWise",
				m.cfg.Name, st.spec.Name, st.spec.Type)
		}
	}
	return nil
}

// NewState starts an incremental decoding session. It fails if a layer
// cannot run incrementally (non-causal attention, or a custom layer that
// implements neither registry.Stepper nor registry.TokenWise).
func (m *Model) NewState() (*State, error) {
	if err := m.runnable(); err != nil {
		return nil, err
	}
	if err := m.CheckIncremental(); err != nil {
		return nil, err
	}
	if !m.weighted {
		return nil, m.errNoWeights()
	}
	s := &State{model: m, layers: make([]registry.State, len(m.steps))}
	for i, st := range m.steps {
		if stepper, ok := st.spec.Layer.(registry.Stepper); ok {
			s.layers[i] = stepper.NewState()
		}
	}
	return s, nil
}

// Step feeds the next tokens of every sequence through the model and
// returns the model's output for them. The first model input holds the new
// tokens, (n, d) or (B, n, d), or their int64 ids, (n) or (B, n); the other inputs keep their meaning for the
// whole sequence (a cross-attention memory is passed whole each time) or
// for the new rows (a mask covers the n new queries against every key so
// far). Feeding a sequence in any split gives, row for row, what Forward
// gives for the whole sequence.
//
// A failed step leaves the session unusable: later steps return the error.
func (m *Model) Step(run *registry.Run, s *State, inputs ...*tensor.Dense) (*tensor.Dense, error) {
	return m.stepState(run, s, inputs, nil)
}

// stepState is Step, in session sess when it is not nil.
func (m *Model) stepState(run *registry.Run, s *State, inputs []*tensor.Dense, sess *Session) (*tensor.Dense, error) {
	if s == nil || s.model != m {
		return nil, fmt.Errorf("model %q: Step needs a State from this model's NewState", m.cfg.Name)
	}
	if s.broken != nil {
		return nil, fmt.Errorf("model %q: session unusable after an earlier failed step: %w", m.cfg.Name, s.broken)
	}
	out, n, err := m.step(run, s, inputs, sess)
	if err != nil {
		s.broken = err
		return nil, err
	}
	s.tokens += n
	for _, ls := range s.layers {
		if ls != nil { // a layer knows its token axis best (nn.MultiheadAttention's may be the first)
			s.tokens = ls.Tokens()
			break
		}
	}
	return out, nil
}

// step runs every layer on the new tokens and returns the output and the
// number of new tokens; in session sess, when not nil, with its value
// slots, Run and lent outputs.
func (m *Model) step(run *registry.Run, s *State, inputs []*tensor.Dense, sess *Session) (*tensor.Dense, int, error) {
	run, err := m.checkInputs(run, inputs)
	if err != nil {
		return nil, 0, err
	}
	n, err := m.newTokens(inputs[0])
	if err != nil {
		return nil, 0, err
	}
	out, err := m.pass(run, inputs, sess, nil, nil, func(i int, layerRun *registry.Run, args []*tensor.Dense) (*tensor.Dense, error) {
		spec := m.steps[i].spec
		var out *tensor.Dense
		var err error
		if state := s.layers[i]; state != nil {
			out, err = stepLayer(spec.Layer.(registry.Stepper), layerRun, state, args)
		} else {
			out, err = forwardLayer(spec.Layer, layerRun, args)
		}
		if err != nil {
			return nil, fmt.Errorf("layer %q (%s) at token %d: %w", spec.Name, spec.Type, s.tokens, err)
		}
		return out, nil
	})
	return out, n, err
}

// newTokens counts the new tokens of each sequence in a step's first input:
// its second to last axis for float32 token vectors, (n, d) or (B, n, d),
// and its last for int64 token ids, (n) or (B, n).
func (m *Model) newTokens(first *tensor.Dense) (int, error) {
	shape := first.Shape()
	if m.cfg.InputDtype(0) == tensor.Int64 {
		if len(shape) < 1 || len(shape) > 2 {
			return 0, fmt.Errorf("model %q: input %q has shape %v, want (n) or (B, n) new token ids",
				m.cfg.Name, m.cfg.Inputs[0], FormatShape(shape))
		}
		return shape[len(shape)-1], nil
	}
	if len(shape) < 2 {
		return 0, fmt.Errorf("model %q: input %q has shape %v, want (n, d) or (B, n, d) new tokens",
			m.cfg.Name, m.cfg.Inputs[0], FormatShape(shape))
	}
	return shape[len(shape)-2], nil
}

// stepLayer calls a layer's Step, turning a panic into an error as
// forwardLayer does for Forward.
func stepLayer(l registry.Stepper, run *registry.Run, state registry.State, args []*tensor.Dense) (out *tensor.Dense, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("panic in Step: %v", r)
		}
	}()
	out, err = l.Step(run, state, args)
	if err == nil && out == nil {
		err = errors.New("Step returned no output")
	}
	return out, err
}

// Decode runs the model incrementally over whole inputs, as `attnrun run
// --incremental` does: it starts a session, feeds the first input's tokens
// (its second to last axis, or the last of int64 token ids) chunk at a
// time, passes the other inputs whole at every step (a cross-attention
// memory, a mask over the memory's keys), and joins the steps' outputs
// along the token axis. Int64 inputs shaped like int64 token ids go with
// the tokens, as in Hugging Face's decoder interface: one named
// attention_mask is cut to the keys so far, any other (position_ids,
// token_type_ids) to the chunk's tokens. The result equals
// Forward's, which makes Decode both a check of the incremental path and
// the way to run a model token by token. run's hook, if any, is called at
// every step with that step's weights, (B, H, chunk, keys so far).
func (m *Model) Decode(run *registry.Run, chunk int, inputs ...*tensor.Dense) (*tensor.Dense, error) {
	if chunk <= 0 {
		return nil, fmt.Errorf("model %q: chunk must be positive, got %d", m.cfg.Name, chunk)
	}
	if len(inputs) == 0 || inputs[0] == nil {
		return nil, fmt.Errorf("model %q: Decode needs the token stream as the first input", m.cfg.Name)
	}
	state, err := m.NewState()
	if err != nil {
		return nil, err
	}
	return m.DecodeFrom(run, state, chunk, inputs...)
}

// DecodeFrom is Decode in session s, which may hold tokens already (a
// session Resume started after a cache): the inputs hold the new tokens,
// and an attention_mask covers the past ones too, (B, past+T).
func (m *Model) DecodeFrom(run *registry.Run, s *State, chunk int, inputs ...*tensor.Dense) (*tensor.Dense, error) {
	if chunk <= 0 {
		return nil, fmt.Errorf("model %q: chunk must be positive, got %d", m.cfg.Name, chunk)
	}
	if len(inputs) == 0 || inputs[0] == nil {
		return nil, fmt.Errorf("model %q: Decode needs the token stream as the first input", m.cfg.Name)
	}
	stream, err := m.tokenStream(inputs[0])
	if err != nil {
		return nil, fmt.Errorf("model %q: input %q: %w", m.cfg.Name, m.cfg.Inputs[0], err)
	}
	past := s.Tokens()
	aligned, err := m.alignedInputs(inputs, past)
	if err != nil {
		return nil, err
	}
	var outs []tokenSlab
	args := append([]*tensor.Dense(nil), inputs...)
	for t0 := 0; t0 < stream.tokens(); t0 += chunk {
		t1 := min(t0+chunk, stream.tokens())
		args[0] = stream.slice(t0, t1)
		for i, ids := range aligned {
			switch {
			case ids == nil:
			case m.cfg.Inputs[i] == "attention_mask":
				args[i] = ids.slice(0, past+t1)
			default:
				args[i] = ids.slice(t0, t1)
			}
		}
		out, err := m.Step(run, s, args...)
		if err != nil {
			return nil, err
		}
		slab, err := tokenRows(out)
		if err != nil {
			return nil, fmt.Errorf("model %q: step output: %w", m.cfg.Name, err)
		}
		outs = append(outs, slab)
	}
	return joinTokens(outs)
}

// alignedInputs views the int64 inputs after the first that are shaped
// like int64 token ids in the first, as rows of ids that Decode cuts with
// the tokens (an attention_mask with past more, for the past tokens); the
// other entries are nil.
func (m *Model) alignedInputs(inputs []*tensor.Dense, past int) ([]*idSlab, error) {
	aligned := make([]*idSlab, len(inputs))
	if m.cfg.InputDtype(0) != tensor.Int64 {
		return aligned, nil
	}
	for i := 1; i < len(inputs) && i < len(m.cfg.Inputs); i++ {
		in := inputs[i]
		want := inputs[0].Shape().Clone()
		if m.cfg.Inputs[i] == "attention_mask" && len(want) > 0 {
			want[len(want)-1] += past
		}
		if m.cfg.InputDtype(i) != tensor.Int64 || in == nil || !in.Shape().Eq(want) {
			continue
		}
		ids, err := idRows(in)
		if err != nil {
			return nil, fmt.Errorf("model %q: input %q: %w", m.cfg.Name, m.cfg.Inputs[i], err)
		}
		aligned[i] = &ids
	}
	return aligned, nil
}

// stream is a model's first input cut along its token axis.
type stream interface {
	tokens() int
	slice(t0, t1 int) *tensor.Dense
}

// tokenStream views the first input as a stream of tokens: float32 token
// vectors, or int64 token ids.
func (m *Model) tokenStream(first *tensor.Dense) (stream, error) {
	if m.cfg.InputDtype(0) == tensor.Int64 {
		return idRows(first)
	}
	return tokenRows(first)
}

// idSlab views an int64 tensor of token ids, (T) or (B, T), as rows of
// tokens.
type idSlab struct {
	shape tensor.Shape
	rows  int
	ids   []int64
}

// idRows views ids, (T) or (B, T), as an idSlab.
func idRows(t *tensor.Dense) (idSlab, error) {
	shape := t.Shape()
	if len(shape) < 1 || len(shape) > 2 {
		return idSlab{}, fmt.Errorf("shape %v: want token ids (T) or (B, T)", FormatShape(shape))
	}
	ids, err := elements[int64](t)
	if err != nil {
		return idSlab{}, err
	}
	return idSlab{shape: shape.Clone(), rows: len(ids) / max(shape[len(shape)-1], 1), ids: ids}, nil
}

func (s idSlab) tokens() int { return s.shape[len(s.shape)-1] }

// slice copies tokens t0..t1 of every row into a new tensor.
func (s idSlab) slice(t0, t1 int) *tensor.Dense {
	out := make([]int64, 0, s.rows*(t1-t0))
	for r := range s.rows {
		out = append(out, s.ids[r*s.tokens()+t0:r*s.tokens()+t1]...)
	}
	shape := s.shape.Clone()
	shape[len(shape)-1] = t1 - t0
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(out))
}

// tokenSlab views a float32 tensor as outer × tokens × inner, the tokens
// being its second to last axis.
type tokenSlab struct {
	shape           tensor.Shape
	outer, n, inner int
	data            []float32
}

// tokenRows views t, of rank 2 or more, as a tokenSlab.
func tokenRows(t *tensor.Dense) (tokenSlab, error) {
	shape := t.Shape()
	if len(shape) < 2 {
		return tokenSlab{}, fmt.Errorf("shape %v has no token axis: want (T, d) or (B, T, d)", FormatShape(shape))
	}
	data, err := elements[float32](t)
	if err != nil {
		return tokenSlab{}, err
	}
	s := tokenSlab{shape: shape.Clone(), outer: 1, n: shape[len(shape)-2], inner: shape[len(shape)-1], data: data}
	for _, d := range shape[:len(shape)-2] {
		s.outer *= d
	}
	return s, nil
}

func (s tokenSlab) tokens() int { return s.n }

// slice copies tokens t0..t1 into a new tensor.
func (s tokenSlab) slice(t0, t1 int) *tensor.Dense {
	out := make([]float32, 0, s.outer*(t1-t0)*s.inner)
	for o := range s.outer {
		base := o * s.n * s.inner
		out = append(out, s.data[base+t0*s.inner:base+t1*s.inner]...)
	}
	shape := s.shape.Clone()
	shape[len(shape)-2] = t1 - t0
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(out))
}

// joinTokens concatenates slabs along the token axis; their other axes
// must agree.
func joinTokens(slabs []tokenSlab) (*tensor.Dense, error) {
	first := slabs[0]
	tokens := 0
	for _, s := range slabs {
		if s.outer != first.outer || s.inner != first.inner || len(s.shape) != len(first.shape) {
			return nil, fmt.Errorf("step outputs %v and %v differ beyond the token axis", first.shape, s.shape)
		}
		tokens += s.n
	}
	out := make([]float32, first.outer*tokens*first.inner)
	t0 := 0
	for _, s := range slabs {
		for o := range s.outer {
			copy(out[(o*tokens+t0)*s.inner:], s.data[o*s.n*s.inner:(o+1)*s.n*s.inner])
		}
		t0 += s.n
	}
	shape := first.shape.Clone()
	shape[len(shape)-2] = tokens
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(out)), nil
}

// elements returns t's elements in row-major order (a strided view
// copied), which must be of type T.
func elements[T any](t *tensor.Dense) ([]T, error) {
	if t.RequiresIterator() {
		m, ok := t.Materialize().(*tensor.Dense)
		if !ok {
			return nil, errors.New("view could not be copied to a dense tensor")
		}
		t = m
	}
	data, ok := t.Data().([]T)
	if !ok {
		var want T
		return nil, fmt.Errorf("dtype %v: want %T", t.Dtype(), want)
	}
	return data, nil
}
