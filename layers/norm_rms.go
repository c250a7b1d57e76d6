package layers

import (
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// RMSNorm is norm.rms, root-mean-square layer normalization (Zhang and
// Sennrich): weight · x / √(mean(x²) + eps) over each token's d values. It
// equals Hugging Face's LlamaRMSNorm (eps default 1e-6, as Llama's
// rms_norm_eps) and torch.nn.RMSNorm(d, eps) of PyTorch 2.4+. The mean is
// accumulated in float64.
type RMSNorm struct {
	// D is the width of the input tokens.
	D int `yaml:"d"`
	// Eps is added to the mean square (default 1e-6).
	Eps float64 `yaml:"eps"`

	norm *tokenNorm
}

var (
	_ registry.Provisioner  = (*RMSNorm)(nil)
	_ registry.TokenWise    = (*RMSNorm)(nil)
	_ registry.OutputShaper = (*RMSNorm)(nil)
	_ registry.FLOPCounter  = (*RMSNorm)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "norm.rms",
		Summary: "root-mean-square normalization with a learned scale (Llama's RMSNorm)",
		New:     func() registry.Layer { return &RMSNorm{Eps: 1e-6} },
	})
}

// Validate checks d and eps and allocates the weight (ones).
func (n *RMSNorm) Validate() error { return n.Provision(nil) }

// PlanParams lists the weight without allocating it.
func (n *RMSNorm) PlanParams() ([]registry.ParamShape, error) { return planParams(n.prepare) }

// Provision checks d and eps and allocates the weight from mem.
func (n *RMSNorm) Provision(mem registry.Memory) (err error) {
	n.norm, err = provision(mem, n.prepare)
	return err
}

func (n *RMSNorm) prepare(a paramAlloc) (*tokenNorm, error) {
	return newTokenNorm(a, n.D, n.Eps, true, false)
}

// Params lists weight, initialized to ones.
func (n *RMSNorm) Params() []registry.Param {
	if n.norm == nil {
		return nil
	}
	return n.norm.params()
}

// Forward normalizes every token of a (T, d) or (B, T, d) input.
func (n *RMSNorm) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if n.norm == nil {
		return nil, errNotValidated
	}
	return n.norm.forward(run, inputs, false)
}

// TokenWise marks the layer as token-wise for incremental decoding.
func (n *RMSNorm) TokenWise() {}

// OutputShape is the input's shape.
func (n *RMSNorm) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "d", n.D)
}

// FLOPs returns 0: normalization is elementwise.
func (n *RMSNorm) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }
