package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Softcap is activation.softcap: cap·tanh(x/cap) elementwise, squashing x
// smoothly into (−cap, cap). Gemma 2 applies it to the logits
// (final_logit_softcapping); attention.sdpa's softcap does the same to the
// attention scores.
type Softcap struct {
	noParams `yaml:"-"` // the layer has no parameters.
	// Cap is the bound; it must be positive.
	Cap float64 `yaml:"cap"`
}

var (
	_ registry.TokenWise    = (*Softcap)(nil)
	_ registry.FLOPCounter  = (*Softcap)(nil)
	_ registry.OutputShaper = (*Softcap)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "activation.softcap",
		Summary: "cap·tanh(x/cap), Gemma's final logit softcapping",
		New:     func() registry.Layer { return &Softcap{} },
	})
}

// Validate checks that cap is positive and finite.
func (s *Softcap) Validate() error {
	if !(s.Cap > 0) || math.IsInf(s.Cap, 0) {
		return fmt.Errorf("cap %g must be positive and finite", s.Cap)
	}
	return nil
}

// Forward computes cap·tanh(x/cap) in float32 steps, as PyTorch's
// logits / cap, tanh, * cap does.
func (s *Softcap) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	x, err := floatInput(inputs)
	if err != nil {
		return nil, err
	}
	capped := float32(s.Cap)
	in := x.Float32s()
	out := make([]float32, len(in))
	for i, v := range in {
		out[i] = float32(math.Tanh(float64(v/capped))) * capped
	}
	return tensor.New(tensor.WithShape(x.Shape().Clone()...), tensor.WithBacking(out)), nil
}

// TokenWise marks activation.softcap as token-wise: it is elementwise.
func (s *Softcap) TokenWise() {}

// FLOPs returns 0: the layer is elementwise.
func (s *Softcap) FLOPs(inputs []tensor.Shape) (int64, error) { return noFLOPs(s.OutputShape(inputs)) }

// OutputShape is the input's shape.
func (s *Softcap) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return floatInputShape(inputs)
}
