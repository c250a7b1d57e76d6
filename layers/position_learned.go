package layers

import (
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

func init() {
	registry.Register(registry.Info{
		ID:      "position.learned",
		Summary: "learned absolute position embedding added to the input (nn.Embedding)",
		New:     func() registry.Layer { return &LearnedPosition{} },
	})
}

// LearnedPosition is position.learned, a learned absolute position
// embedding added to the input: x + weight[0:T]. It equals
// x + nn.Embedding(context_length, d)(torch.arange(T)), as the seeds'
// attention modules with a positional_encoding do it.
type LearnedPosition struct {
	// ContextLength is the number of positions, the longest sequence accepted.
	ContextLength int `yaml:"context_length"`
	// D is the width of the input tokens and of each position vector.
	D int `yaml:"d"`

	weight *tensor.Dense
}

var (
	_ registry.Provisioner  = (*LearnedPosition)(nil)
	_ registry.OutputShaper = (*LearnedPosition)(nil)
	_ registry.FLOPCounter  = (*LearnedPosition)(nil)
	_ registry.Stepper      = (*LearnedPosition)(nil)
)

// Validate checks the sizes and allocates the zeroed (context_length, d)
// weight.
func (p *LearnedPosition) Validate() error { return p.Provision(nil) }

// PlanParams lists the weight without allocating it.
func (p *LearnedPosition) PlanParams() ([]registry.ParamShape, error) { return planParams(p.prepare) }

// Provision checks the sizes and allocates the zeroed weight from mem.
func (p *LearnedPosition) Provision(mem registry.Memory) (err error) {
	p.weight, err = provision(mem, p.prepare)
	return err
}

func (p *LearnedPosition) prepare(a paramAlloc) (*tensor.Dense, error) {
	if err := firstError(positive("context_length", p.ContextLength), positive("d", p.D)); err != nil {
		return nil, err
	}
	return a.zeros("weight", p.ContextLength, p.D)
}

// Params lists the embedding weight, initialized N(0, 1) as nn.Embedding.
func (p *LearnedPosition) Params() []registry.Param {
	if p.weight == nil {
		return nil
	}
	return []registry.Param{{Name: "weight", Value: p.weight, Init: registry.NormalInit(0, 1)}}
}

// Forward adds position t's vector to token t of every sequence.
func (p *LearnedPosition) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := readyInput(p.weight != nil, inputs)
	if err != nil {
		return nil, err
	}
	return p.add(in, 0)
}

// add returns in plus the embeddings of positions pos0, pos0+1, ...,
// which may not reach past context_length.
func (p *LearnedPosition) add(in seqs, pos0 int) (*tensor.Dense, error) {
	shape := p.weight.Shape()
	if err := in.expectWidth("d", shape[1]); err != nil {
		return nil, err
	}
	if err := checkContext(pos0+in.T, shape[0]); err != nil {
		return nil, err
	}
	out, data := in.newOutput(in.D)
	positions := floats(p.weight)[pos0*in.D : (pos0+in.T)*in.D]
	for b := range in.B {
		base := b * in.T * in.D
		for i, pos := range positions {
			data[base+i] = in.data[base+i] + pos
		}
	}
	return out, nil
}

// OutputShape is the input's shape; T may not exceed context_length.
func (p *LearnedPosition) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return widthShape(inputs, "d", p.D, p.ContextLength, p.D)
}

// FLOPs returns 0: adding the embedding is elementwise.
func (p *LearnedPosition) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// NewState starts a session at position 0.
func (p *LearnedPosition) NewState() registry.State { return &positionState{} }

// Step adds the embeddings of the new tokens' positions; the session may
// not grow past context_length.
func (p *LearnedPosition) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if p.weight == nil {
		return nil, errNotValidated
	}
	return positionStep(state, inputs, p.add)
}
