package layers

import (
	"slices"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Add is nn.add: the elementwise sum of its inputs, for residual
// connections; in PyTorch, x + sublayer(x).
type Add struct {
	noConfig `yaml:"-"`
}

var (
	_ registry.Layer        = (*Add)(nil)
	_ registry.OutputShaper = (*Add)(nil)
	_ registry.FLOPCounter  = (*Add)(nil)
	_ registry.TokenWise    = (*Add)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "nn.add",
		Summary: "elementwise sum of the inputs (residual connections)",
		New:     func() registry.Layer { return &Add{} },
	})
}

// Forward takes one or more inputs of the same shape and returns their sum.
func (a *Add) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	var buf [4]seqs
	ins, err := readAll(buf[:], inputs, "the shape of", func(first, s seqs) bool {
		return slices.Equal(first.shape(first.D), s.shape(s.D))
	})
	if err != nil {
		return nil, err
	}
	out, data := ins[0].newOutput(run, ins[0].D)
	copy(data, ins[0].data)
	for _, in := range ins[1:] {
		for i, x := range in.data {
			data[i] += x
		}
	}
	return out, nil
}

// OutputShape is the inputs' common shape.
func (a *Add) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	ins, err := shapeAll(inputs, "the shape of", func(first, s seqs) bool {
		return first.batched == s.batched && first.B == s.B && first.T == s.T && first.D == s.D
	})
	if err != nil {
		return nil, err
	}
	return ins[0].shape(ins[0].D), nil
}

// FLOPs returns 0: the sum is elementwise.
func (a *Add) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// TokenWise marks nn.add as token-wise for incremental decoding.
func (a *Add) TokenWise() {}
