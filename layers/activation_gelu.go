package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

func init() {
	registry.Register(registry.Info{
		ID:      "activation.gelu",
		Summary: "Gaussian error linear unit, exact (erf) or tanh approximation (nn.GELU)",
		New:     func() registry.Layer { return &GELU{Approximate: "none"} },
	})
}

// GELU is activation.gelu, x·Φ(x), applied to every value. It equals
// nn.GELU(approximate): "none" (default) is the exact 0.5·x·(1 + erf(x/√2));
// "tanh" is 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), GPT-2's gelu_new.
// Both are computed in float64 and rounded once.
type GELU struct {
	noParams `yaml:"-"` // the activation has no parameters.
	// Approximate is "none" (erf) or "tanh".
	Approximate string `yaml:"approximate"`

	f func(float64) float64
}

var (
	_ registry.Layer        = (*GELU)(nil)
	_ registry.TokenWise    = (*GELU)(nil)
	_ registry.OutputShaper = (*GELU)(nil)
	_ registry.FLOPCounter  = (*GELU)(nil)
)

// Validate checks approximate.
func (g *GELU) Validate() error {
	g.f = nil
	switch g.Approximate {
	case "none":
		g.f = gelu
	case "tanh":
		g.f = geluTanh
	default:
		return fmt.Errorf("approximate %q is not \"none\" or \"tanh\"", g.Approximate)
	}
	return nil
}

// Forward applies the activation to a (T, d) or (B, T, d) input.
func (g *GELU) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := readyInput(g.f != nil, inputs)
	if err != nil {
		return nil, err
	}
	out, data := in.newOutput(run, in.D)
	applyActivation(data, in.data, g.f)
	return out, nil
}

// TokenWise marks the layer as token-wise for incremental decoding.
func (g *GELU) TokenWise() {}

// applyActivation writes f(x) to y, element by element, in float64.
func applyActivation(y, x []float32, f func(float64) float64) {
	for i, v := range x {
		y[i] = float32(f(float64(v)))
	}
}

// gelu is the exact GELU, x·Φ(x).
func gelu(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

// geluTanh is GELU's tanh approximation (Hendrycks and Gimpel), GPT-2's.
func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// silu is x·σ(x), the activation of Llama's MLP (nn.SiLU).
func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

// relu is max(x, 0) (nn.ReLU).
func relu(x float64) float64 { return max(x, 0) }

// activations are the activations nn.mlp offers, by config name.
var activations = map[string]func(float64) float64{
	"gelu":      gelu,
	"gelu_tanh": geluTanh,
	"silu":      silu,
	"relu":      relu,
}

// OutputShape is the input's shape.
func (g *GELU) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "", 0)
}

// FLOPs returns 0: the activation is elementwise.
func (g *GELU) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }
