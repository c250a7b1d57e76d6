package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Select is nn.select: feature index of the last axis of its input, the
// axis dropped, as PyTorch's x[..., index] (torch.select(x, -1, index)):
// (B, T, d) to (B, T). A question-answering head splits its two logits so
// (start_logits, end_logits = logits.split(1, dim=-1), each squeezed).
type Select struct {
	// Index is the feature taken, from 0.
	Index int `yaml:"index"`
}

var (
	_ registry.FLOPCounter  = (*Select)(nil)
	_ registry.OutputShaper = (*Select)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "nn.select",
		Summary: "one feature of the last axis, x[..., index]: a question-answering head's start or end logits",
		New:     func() registry.Layer { return &Select{} },
	})
}

// Validate checks that index is not negative.
func (s *Select) Validate() error {
	if s.Index < 0 {
		return fmt.Errorf("index %d must be at least 0", s.Index)
	}
	return nil
}

// Params returns nil: the layer has no parameters.
func (s *Select) Params() []registry.Param { return nil }

// Forward copies feature index of every row of inputs[0].
func (s *Select) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	src, in, shape, err := copiedInput(inputs, s.OutputShape)
	if err != nil {
		return nil, err
	}
	d := in[len(in)-1]
	out := make([]float32, len(src)/d)
	for r := range out {
		out[r] = src[r*d+s.Index]
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(out)), nil
}

// FLOPs returns 0: the layer copies.
func (s *Select) FLOPs(inputs []tensor.Shape) (int64, error) { return noFLOPs(s.OutputShape(inputs)) }

// OutputShape is the input's shape without its last axis.
func (s *Select) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	x := inputs[0]
	if len(x) < 2 || s.Index >= x[len(x)-1] {
		return nil, fmt.Errorf("input shape %s: want rank 2 or more with more than %d features", fmtShape(x), s.Index)
	}
	return x[:len(x)-1].Clone(), nil
}
