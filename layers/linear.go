package layers

import (
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Linear is nn.linear, the affine map x Wᵀ + b applied to every token. It
// equals nn.Linear(d_in, d_out, bias); the weight is stored (d_out, d_in)
// as PyTorch stores it.
type Linear struct {
	// DIn is the width of the input tokens.
	DIn int `yaml:"d_in"`
	// DOut is the width of the output tokens.
	DOut int `yaml:"d_out"`
	// Bias adds a learned bias (default true, as nn.Linear).
	Bias bool `yaml:"bias"`
	// TiedWeight, when set, names the model parameter used as the weight
	// instead of one of the layer's own ("wte.weight" for a language-model
	// head tied to the token embedding; see linear_tied.go).
	TiedWeight string `yaml:"tied_weight"`

	weights       *linearWeights
	packedWeights `yaml:"-"` // the packed copies of the weights (packs.go), ParamsChanged
}

var (
	_ registry.Provisioner  = (*Linear)(nil)
	_ registry.OutputShaper = (*Linear)(nil)
	_ registry.FLOPCounter  = (*Linear)(nil)
	_ registry.TokenWise    = (*Linear)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "nn.linear",
		Summary: "affine map x Wᵀ + b (nn.Linear)",
		New:     func() registry.Layer { return &Linear{Bias: true} },
	})
}

// Validate checks the sizes and allocates zeroed parameters.
func (l *Linear) Validate() error { return l.Provision(nil) }

// PlanParams lists weight and bias without allocating them.
func (l *Linear) PlanParams() ([]registry.ParamShape, error) { return planParams(l.prepare) }

// Provision checks the sizes and allocates zeroed parameters from mem.
func (l *Linear) Provision(mem registry.Memory) (err error) {
	l.weights, l.packs, err = provisionPacked(mem, l.prepare)
	return err
}

func (l *Linear) prepare(a paramAlloc) (*linearWeights, error) {
	if err := firstError(positive("d_in", l.DIn), positive("d_out", l.DOut)); err != nil {
		return nil, err
	}
	if l.TiedWeight != "" {
		return newTiedLinearWeights(a, l.DIn, l.DOut, l.Bias)
	}
	return newLinearWeights(a, "", l.DIn, l.DOut, l.Bias)
}

// Params lists weight then bias, initialized as nn.Linear does.
func (l *Linear) Params() []registry.Param {
	if l.weights == nil {
		return nil
	}
	if l.TiedWeight != "" { // the weight belongs to the layer it is tied to
		return l.weights.params("")[1:]
	}
	return l.weights.params("")
}

// Forward maps (T, d_in) or (B, T, d_in) to (T, d_out) or (B, T, d_out).
func (l *Linear) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := readyInput(l.weights != nil, inputs)
	if err == nil {
		err = l.checkTied()
	}
	if err != nil {
		return nil, err
	}
	if err := in.expectWidth("d_in", l.weights.in); err != nil {
		return nil, err
	}
	out, data := in.newOutput(run, l.weights.out)
	l.weights.apply(data, in.data, in.rows())
	return out, nil
}

// OutputShape is the input's shape with width d_out.
func (l *Linear) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return widthShape(inputs, "d_in", l.DIn, 0, l.DOut)
}

// FLOPs counts the product with the weight, 2·B·T·d_in·d_out; the bias
// add is elementwise.
func (l *Linear) FLOPs(inputs []tensor.Shape) (int64, error) {
	return linearFLOPs(inputs, l.DIn, l.DOut)
}

// linearFLOPs counts a product of every token of the one input, of width
// dIn, by a (dIn, dOut) weight: 2·B·T·dIn·dOut.
func linearFLOPs(inputs []tensor.Shape, dIn, dOut int) (int64, error) {
	x, err := oneFLOPInput(inputs, "d_in", dIn)
	if err != nil {
		return 0, err
	}
	var c flopCount
	c.linear(x.rows(), dIn, dOut)
	return c.result()
}

// TokenWise marks nn.linear as token-wise for incremental decoding.
func (l *Linear) TokenWise() {}
