package layers

import (
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Dropout is nn.dropout. It equals nn.Dropout(p): in train mode each value
// is zeroed with probability p and the kept ones are scaled by 1/(1-p); in
// eval mode it is the identity. The mask is drawn from the run's RNG.
type Dropout struct {
	noParams `yaml:"-"` // the layer has no parameters.
	// P is the probability of zeroing a value (default 0.5, as nn.Dropout).
	P float64 `yaml:"p"`
}

var (
	_ registry.Layer        = (*Dropout)(nil)
	_ registry.OutputShaper = (*Dropout)(nil)
	_ registry.FLOPCounter  = (*Dropout)(nil)
	_ registry.TokenWise    = (*Dropout)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "nn.dropout",
		Summary: "zero each value with probability p in train mode, identity in eval (nn.Dropout)",
		New:     func() registry.Layer { return &Dropout{P: 0.5} },
	})
}

// Validate checks that p is in [0, 1).
func (d *Dropout) Validate() error { return probability("p", d.P) }

// Forward returns the input itself in eval mode (as PyTorch does) and a
// new tensor with the mask applied in train mode.
func (d *Dropout) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := singleInput(inputs)
	if err != nil {
		return nil, err
	}
	if err := probability("p", d.P); err != nil {
		return nil, err
	}
	p, rng, err := activeDropout(run, "p", d.P)
	if err != nil {
		return nil, err
	}
	if p == 0 {
		return in.dense, nil
	}
	out, data := in.newOutput(run, in.D)
	keep := 1 / (1 - p)
	for i, x := range in.data {
		if rng.Float32() >= p {
			data[i] = x * keep
		}
	}
	return out, nil
}

// OutputShape is the input's shape.
func (d *Dropout) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "", 0)
}

// FLOPs returns 0: dropout is elementwise.
func (d *Dropout) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// TokenWise marks nn.dropout as token-wise for incremental decoding.
func (d *Dropout) TokenWise() {}
