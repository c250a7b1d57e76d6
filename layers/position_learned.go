package layers

import (
	"errors"
	"fmt"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// LearnedPosition is position.learned, a learned absolute position
// embedding added to the input: x + weight[offset:offset+T]. It equals
// x + nn.Embedding(context_length + offset, d)(torch.arange(T) + offset),
// as the seeds' attention modules with a positional_encoding (offset 0)
// and GPT-2's wpe do it, and OPT's learned positions with offset 2.
//
// A second input, int64 position_ids (T) or (B, T), gives each token's
// position instead of its index, as Hugging Face models take them (OPT's
// left padding: cumsum(attention_mask)·attention_mask − 1); the rows read
// are position_ids + offset. Incremental steps count positions themselves
// from the token stream alone, or take the new tokens' position_ids.
type LearnedPosition struct {
	// ContextLength is the number of positions, the longest sequence accepted.
	ContextLength int `yaml:"context_length"`
	// D is the width of the input tokens and of each position vector.
	D int `yaml:"d"`
	// Offset is how many rows precede position 0 in the table (OPT: 2);
	// the weight has context_length + offset rows.
	Offset int `yaml:"offset"`

	weight *tensor.Dense
}

var (
	_ registry.Provisioner  = (*LearnedPosition)(nil)
	_ registry.OutputShaper = (*LearnedPosition)(nil)
	_ registry.FLOPCounter  = (*LearnedPosition)(nil)
	_ registry.Stepper      = (*LearnedPosition)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "position.learned",
		Summary: "learned absolute position embedding added to the input (nn.Embedding)",
		New:     func() registry.Layer { return &LearnedPosition{} },
	})
}

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
	if p.Offset < 0 || p.Offset > maxElements-p.ContextLength {
		return nil, fmt.Errorf("offset %d must be between 0 and the table's size limit", p.Offset)
	}
	return a.zeros("weight", p.ContextLength+p.Offset, p.D)
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
	if p.weight != nil && len(inputs) == 2 {
		return p.addAt(run, inputs)
	}
	in, err := readyInput(p.weight != nil, inputs)
	if err != nil {
		return nil, err
	}
	return p.add(run, in, 0)
}

// addAt returns inputs[0] plus the embeddings of the positions
// inputs[1] gives, (T) shared by every sequence or (B, T).
func (p *LearnedPosition) addAt(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := readSeqs(inputs[0])
	if err != nil {
		return nil, err
	}
	if err := in.expectWidth("d", p.D); err != nil {
		return nil, err
	}
	ids, shape, err := readIDs("position_ids", inputs[1])
	if err != nil {
		return nil, err
	}
	if !shape.Eq(tensor.Shape{in.T}) && !shape.Eq(tensor.Shape{in.B, in.T}) {
		return nil, fmt.Errorf("position_ids shape %s: want (%d,) or (%d, %d), one position per token", fmtShape(shape), in.T, in.B, in.T)
	}
	if len(ids) > maxElements/p.D {
		return nil, errors.New("the embedded positions would exceed the output size limit")
	}
	sc := getScratch(len(ids) * p.D)
	defer sc.release()
	pos := sc.floats(len(ids) * p.D)
	if err := lookupRows(pos, floats(p.weight), p.ContextLength+p.Offset, p.D, ids, int64(p.Offset), "context_length + offset"); err != nil {
		return nil, err
	}
	out, data := in.newOutput(run, in.D)
	for i := range data {
		data[i] = in.data[i] + pos[i%len(pos)]
	}
	return out, nil
}

// stepAt is Step with position_ids: the new tokens take the positions
// given, whatever the tokens so far, and the session advances by them.
func (p *LearnedPosition) stepAt(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := readSeqs(inputs[0])
	if err != nil {
		return nil, err
	}
	s, err := stateOf[positionState](state, in.B)
	if err != nil {
		return nil, err
	}
	out, err := p.addAt(run, inputs)
	if err != nil {
		return nil, err
	}
	s.advance(in.B, in.T)
	return out, nil
}

// add returns in plus the embeddings of positions pos0, pos0+1, ...,
// which may not reach past context_length.
func (p *LearnedPosition) add(run *registry.Run, in seqs, pos0 int) (*tensor.Dense, error) {
	shape := p.weight.Shape()
	if err := in.expectWidth("d", shape[1]); err != nil {
		return nil, err
	}
	if err := checkContext(pos0+in.T, shape[0]-p.Offset); err != nil {
		return nil, err
	}
	out, data := in.newOutput(run, in.D)
	pos0 += p.Offset
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
	if len(inputs) == 2 { // position_ids: any position below context_length
		return widthShape(inputs[:1], "d", p.D, 0, p.D)
	}
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
	if len(inputs) == 2 { // the new tokens' position_ids
		return p.stepAt(run, state, inputs)
	}
	return positionStep(run, state, inputs, p.add)
}
