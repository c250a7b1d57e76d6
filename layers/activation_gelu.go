package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// GELU is activation.gelu, x·Φ(x), applied to every value. It equals
// nn.GELU(approximate): "none" (default) is the exact 0.5·x·(1 + erf(x/√2)),
// computed as PyTorch and its ONNX export compute it, in float32 operations
// on a float32 erf within one ulp (kernels.GeluErf32, vectorized and split
// across the cores); "tanh" is 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), GPT-2's
// gelu_new, computed in float64 and rounded once.
type GELU struct {
	noParams `yaml:"-"` // the activation has no parameters.
	// Approximate is "none" (erf) or "tanh".
	Approximate string `yaml:"approximate"`

	f activation
}

var (
	_ registry.Layer        = (*GELU)(nil)
	_ registry.TokenWise    = (*GELU)(nil)
	_ registry.OutputShaper = (*GELU)(nil)
	_ registry.FLOPCounter  = (*GELU)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "activation.gelu",
		Summary: "Gaussian error linear unit, exact (erf) or tanh approximation (nn.GELU)",
		New:     func() registry.Layer { return &GELU{Approximate: "none"} },
	})
}

// Validate checks approximate.
func (g *GELU) Validate() error {
	g.f = activation{}
	switch g.Approximate {
	case "none":
		g.f = activations["gelu"]
	case "tanh":
		g.f = activations["gelu_tanh"]
	default:
		return fmt.Errorf("approximate %q is not \"none\" or \"tanh\"", g.Approximate)
	}
	return nil
}

// Forward applies the activation to a (T, d) or (B, T, d) input.
func (g *GELU) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := readyInput(g.f.scalar != nil, inputs)
	if err != nil {
		return nil, err
	}
	out, data := in.newOutput(run, in.D)
	applyActivation(data, in.data, g.f)
	return out, nil
}

// TokenWise marks the layer as token-wise for incremental decoding.
func (g *GELU) TokenWise() {}

// activation is one of the activations layers apply elementwise: scalar
// computes it on one value, in float64; vector, where set, on a whole
// slice at once (y and x may be the same slice), faster and within
// float32's rounding of scalar.
type activation struct {
	scalar func(float64) float64
	vector func(y, x []float32)
}

// applyActivation writes a(x) to y: by its vector form, or element by
// element in float64.
func applyActivation(y, x []float32, a activation) {
	if a.vector != nil {
		a.vector(y, x)
		return
	}
	for i, v := range x {
		y[i] = float32(a.scalar(float64(v)))
	}
}

// geluVector is the exact GELU on a slice as PyTorch's float32 kernel and
// the exported graph (Div, Erf, Add, Mul, Mul) compute it: BERT's MLP
// spent more time in math.Erf than in its matrix products.
func geluVector(y, x []float32) { kernels.GeluErf32(y, x, math.Sqrt2, 1, 0.5) }

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
var activations = map[string]activation{
	"gelu":      {scalar: gelu, vector: geluVector},
	"gelu_tanh": {scalar: geluTanh},
	"silu":      {scalar: silu},
	"relu":      {scalar: relu},
}

// OutputShape is the input's shape.
func (g *GELU) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "", 0)
}

// FLOPs returns 0: the activation is elementwise.
func (g *GELU) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }
