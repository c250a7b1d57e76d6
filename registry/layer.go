package registry

import (
	"context"
	"math"
	"math/rand/v2"

	"gorgonia.org/tensor"
)

// Layer is what every layer type implements. The layer value doubles as its
// configuration: exported fields with yaml tags are decoded from the model
// config (strictly: an unknown field is an error), then Validate runs.
//
// Forward must not modify the layer: one layer serves concurrent forward
// passes, each with its own Run.
type Layer interface {
	// Validate checks the configuration and prepares the layer. Errors name
	// the field and the rule ("num_heads 3 does not divide d_out 8"); the
	// model prefixes the layer name. After a nil return, Params lists the
	// parameters with their final shapes.
	Validate() error
	// Params lists the layer's parameters in the order and under the names
	// PyTorch's state_dict() uses for the equivalent module. The tensors are
	// the layer's own storage: writing into them sets the weights.
	Params() []Param
	// Forward computes the layer's output. Inputs arrive in the order the
	// config's `inputs:` names them; most layers take one, (T, d) or (B, T, d).
	Forward(run *Run, inputs []*tensor.Dense) (*tensor.Dense, error)
}

// Param is one named parameter of a layer.
type Param struct {
	// Name is the state_dict name within the layer, e.g. "W_query.weight".
	Name string
	// Value is the parameter's storage: float32, row-major, contiguous.
	// Linear weights are (out, in), as PyTorch stores them.
	Value *tensor.Dense
	// Init is how a fresh model fills it, following PyTorch's scheme for
	// the equivalent module.
	Init Init
}

// Dist names the distribution a parameter is initialized from.
type Dist int

// The distributions PyTorch's default initializers draw from.
const (
	// Uniform draws from [A, B), as torch.rand and tensor.uniform_.
	Uniform Dist = iota
	// Normal draws with mean A and standard deviation B, as torch.randn,
	// tensor.normal_ and nn.Embedding.
	Normal
	// Constant fills with A, as nn.LayerNorm's ones and zeros.
	Constant
)

// Init is an initialization scheme: a distribution and its two numbers.
type Init struct {
	Dist Dist
	A, B float64
}

// UniformInit draws from [lo, hi), as torch.rand (0, 1) does.
func UniformInit(lo, hi float64) Init { return Init{Dist: Uniform, A: lo, B: hi} }

// NormalInit draws from N(mean, std²), as torch.randn (0, 1) and nn.Embedding do.
func NormalInit(mean, std float64) Init { return Init{Dist: Normal, A: mean, B: std} }

// ConstantInit fills with v.
func ConstantInit(v float64) Init { return Init{Dist: Constant, A: v} }

// LinearInit is nn.Linear's scheme for a layer with fanIn inputs: both the
// weight (kaiming_uniform_ with a=√5) and the bias draw from U(-b, b) with
// b = 1/√fanIn. The bound is computed the way PyTorch computes it, so that
// a PyTorch-compatible generator reproduces its numbers bit for bit.
func LinearInit(fanIn int) Init {
	// calculate_gain("leaky_relu", a) squares a = √5 in float64, giving
	// 5.000000000000001, not 5; the bound differs in its last bits for some
	// fan_in, and a float32 rounding of it can flip.
	a := math.Sqrt(5)
	gain := math.Sqrt(2.0 / (1 + a*a))
	bound := math.Sqrt(3.0) * (gain / math.Sqrt(float64(fanIn)))
	return UniformInit(-bound, bound)
}

// LinearBiasInit is nn.Linear's bias scheme: U(-1/√fanIn, 1/√fanIn).
func LinearBiasInit(fanIn int) Init {
	bound := 1 / math.Sqrt(float64(fanIn))
	return UniformInit(-bound, bound)
}

// Run carries what one forward pass needs besides the inputs. A Run belongs
// to one forward pass; concurrent passes use separate Runs.
type Run struct {
	// Context carries the pass's deadline and cancellation: models check it
	// between layers and long kernels inside their outer loops. Nil means
	// context.Background().
	Context context.Context
	// Train selects training behaviour (dropout active). Eval is the default.
	Train bool
	// RNG draws dropout masks in train mode. Nil in train mode is an error
	// for layers that need it.
	RNG *rand.Rand
	// Layer is the path of the layer being run ("attn", "attn.heads.0"),
	// set by the model before each Forward.
	Layer string
	// Hook, if set, receives the attention weights of every attention layer:
	// shape (B, H, Tq, Tk), after the mask and softmax, after dropout in train
	// mode (the weights that multiply V). Layers compute weights only when a
	// hook is set.
	Hook func(layer string, weights *tensor.Dense)
	// Outputs, if set, lends the layer the tensor to write its output into
	// (models.Session sets it): layers that support it take their output
	// from Outputs.Float32 instead of allocating it. Nil means allocate.
	Outputs *Outputs
}

// Lender is the run's Outputs, or nil (allocate) for a nil run. Its
// Float32 takes a nil receiver, so a layer writes
// run.Lender().Float32(shape...) whether a session runs it or not.
func (r *Run) Lender() *Outputs {
	if r == nil {
		return nil
	}
	return r.Outputs
}

// Err reports why the pass must stop (context.Canceled or
// context.DeadlineExceeded), or nil while it may go on.
func (r *Run) Err() error {
	if r == nil || r.Context == nil {
		return nil
	}
	return r.Context.Err()
}

// WantWeights reports whether attention layers should materialize weights.
func (r *Run) WantWeights() bool { return r != nil && r.Hook != nil }

// Observe hands attention weights to the hook, if any, under the current layer path.
func (r *Run) Observe(weights *tensor.Dense) {
	if r != nil && r.Hook != nil {
		r.Hook(r.Layer, weights)
	}
}
