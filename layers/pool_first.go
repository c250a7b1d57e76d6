package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// FirstPool is pool.first: the vector of each sequence's first token, (B,
// T, d) or (T, d) to (B, d) or (1, d), as Hugging Face's BertPooler takes
// hidden_states[:, 0] before its dense layer and tanh.
type FirstPool struct{}

var (
	_ registry.FLOPCounter  = (*FirstPool)(nil)
	_ registry.OutputShaper = (*FirstPool)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "pool.first",
		Summary: "the first token of each sequence (the [CLS] token BERT's pooler reads)",
		New:     func() registry.Layer { return &FirstPool{} },
	})
}

// Validate has nothing to check: the layer has no configuration.
func (p *FirstPool) Validate() error { return nil }

// Params returns nil: the layer has no parameters.
func (p *FirstPool) Params() []registry.Param { return nil }

// Forward copies the first token of every sequence of inputs[0].
func (p *FirstPool) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	x, err := readSeqs(inputs[0])
	if err != nil {
		return nil, err
	}
	out := make([]float32, x.B*x.D)
	for b := range x.B {
		copy(out[b*x.D:(b+1)*x.D], x.data[b*x.T*x.D:])
	}
	return tensor.New(tensor.WithShape(x.B, x.D), tensor.WithBacking(out)), nil
}

// FLOPs returns 0: the layer copies.
func (p *FirstPool) FLOPs(inputs []tensor.Shape) (int64, error) {
	return noFLOPs(p.OutputShape(inputs))
}

// OutputShape is (B, d), or (1, d) for a (T, d) input.
func (p *FirstPool) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	x, err := shapeSeqs(inputs[0])
	if err != nil {
		return nil, err
	}
	return tensor.Shape{x.B, x.D}, nil
}
