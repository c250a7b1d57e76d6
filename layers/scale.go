package layers

import (
	"errors"
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Scale is nn.scale: its input times a constant factor, or divided by a
// constant divisor, elementwise. Granite multiplies each sublayer's output
// by residual_multiplier before the residual sum and divides its logits by
// logits_scaling; Scale spells both as PyTorch computes them (a division
// is not a multiplication by the rounded reciprocal), in float32.
type Scale struct {
	noParams `yaml:"-"` // the layer has no parameters.
	// Factor multiplies the input; set it or divisor, not both.
	Factor float64 `yaml:"factor"`
	// Divisor divides the input; it must not be 0.
	Divisor float64 `yaml:"divisor"`
}

var (
	_ registry.TokenWise    = (*Scale)(nil)
	_ registry.FLOPCounter  = (*Scale)(nil)
	_ registry.OutputShaper = (*Scale)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "nn.scale",
		Summary: "x·factor or x/divisor by a constant (Granite's residual multiplier and logits scaling)",
		New:     func() registry.Layer { return &Scale{} },
	})
}

// Validate checks that exactly one of factor and divisor is set, to a
// finite number.
func (s *Scale) Validate() error {
	switch {
	case (s.Factor == 0) == (s.Divisor == 0):
		return errors.New("set one of factor (x·factor) and divisor (x/divisor), to a nonzero number")
	case math.IsNaN(s.Factor) || math.IsInf(s.Factor, 0):
		return fmt.Errorf("factor %g is not finite", s.Factor)
	case math.IsNaN(s.Divisor) || math.IsInf(s.Divisor, 0):
		return fmt.Errorf("divisor %g is not finite", s.Divisor)
	}
	return nil
}

// Forward multiplies or divides every element by the float32 constant, as
// PyTorch does a float32 tensor by a Python float.
func (s *Scale) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	x, err := floatInput(inputs)
	if err != nil {
		return nil, err
	}
	in := x.Float32s()
	out := make([]float32, len(in))
	if s.Divisor != 0 {
		d := float32(s.Divisor)
		for i, v := range in {
			out[i] = v / d
		}
	} else {
		f := float32(s.Factor)
		for i, v := range in {
			out[i] = v * f
		}
	}
	return tensor.New(tensor.WithShape(x.Shape().Clone()...), tensor.WithBacking(out)), nil
}

// TokenWise marks nn.scale as token-wise: it is elementwise.
func (s *Scale) TokenWise() {}

// FLOPs returns 0: the layer is elementwise.
func (s *Scale) FLOPs(inputs []tensor.Shape) (int64, error) { return noFLOPs(s.OutputShape(inputs)) }

// OutputShape is the input's shape.
func (s *Scale) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return floatInputShape(inputs)
}
