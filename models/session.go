package models

import (
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Session runs a model again and again, as a server or a benchmark does,
// without allocating in the steady state: it keeps the value slots and the
// Run of a pass, and lends the layers their output tensors
// (registry.Outputs), the same ones pass after pass while the input shapes
// stay the same. The result of Forward is therefore the session's: it is
// valid until the session's next Forward, which overwrites it (Clone it to
// keep it). A Session serves one pass at a time; concurrent passes each
// use their own Session (the model itself may be shared).
type Session struct {
	m       *Model
	values  []*tensor.Dense
	run     registry.Run
	outputs registry.Outputs
}

// NewSession returns a Session running m.
func (m *Model) NewSession() *Session {
	return &Session{m: m, values: make([]*tensor.Dense, len(m.cfg.Inputs)+len(m.steps)+m.numArgs)}
}

// Forward runs the model as Model.Forward does, with the same results, in
// the session's memory: the returned tensor belongs to the session and is
// overwritten by its next Forward.
func (s *Session) Forward(run *registry.Run, inputs ...*tensor.Dense) (*tensor.Dense, error) {
	return s.m.forward(run, inputs, s, nil, nil)
}

// Step runs a decoding step as Model.Step does, with the same results, in
// the session's memory: the returned tensor belongs to the session and is
// overwritten by its next Forward or Step. state is the decoding state
// (Model.NewState), which the session does not own: one session may serve
// many states in turn.
func (s *Session) Step(run *registry.Run, state *State, inputs ...*tensor.Dense) (*tensor.Dense, error) {
	return s.m.stepState(run, state, inputs, s)
}
