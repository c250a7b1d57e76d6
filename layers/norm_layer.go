package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// LayerNorm is norm.layer, layer normalization over each token's d values:
// (x − mean) / √(var + eps) · weight + bias, with the biased variance. It
// equals nn.LayerNorm(d, eps, elementwise_affine). Mean and variance are
// accumulated in float64; with a weight each value is computed in float64
// and rounded once (kernels.LayerNorm32, as the executor's LayerNormalization).
type LayerNorm struct {
	// D is the width of the input tokens (normalized_shape).
	D int `yaml:"d"`
	// Eps is added to the variance (default 1e-5, as nn.LayerNorm).
	Eps float64 `yaml:"eps"`
	// ElementwiseAffine learns weight and bias (default true).
	ElementwiseAffine bool `yaml:"elementwise_affine"`

	norm *tokenNorm
}

var (
	_ registry.Provisioner  = (*LayerNorm)(nil)
	_ registry.TokenWise    = (*LayerNorm)(nil)
	_ registry.OutputShaper = (*LayerNorm)(nil)
	_ registry.FLOPCounter  = (*LayerNorm)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "norm.layer",
		Summary: "layer normalization over the last axis (nn.LayerNorm)",
		New:     func() registry.Layer { return &LayerNorm{Eps: 1e-5, ElementwiseAffine: true} },
	})
}

// Validate checks d and eps and allocates weight (ones) and bias (zeros)
// when elementwise_affine is set.
func (n *LayerNorm) Validate() error { return n.Provision(nil) }

// PlanParams lists weight and bias, if any, without allocating them.
func (n *LayerNorm) PlanParams() ([]registry.ParamShape, error) { return planParams(n.prepare) }

// Provision checks d and eps and allocates the parameters from mem.
func (n *LayerNorm) Provision(mem registry.Memory) (err error) {
	n.norm, err = provision(mem, n.prepare)
	return err
}

func (n *LayerNorm) prepare(a paramAlloc) (*tokenNorm, error) {
	return newTokenNorm(a, n.D, n.Eps, n.ElementwiseAffine, n.ElementwiseAffine)
}

// Params lists weight then bias, initialized to ones and zeros as
// nn.LayerNorm does; none without elementwise_affine.
func (n *LayerNorm) Params() []registry.Param {
	if n.norm == nil {
		return nil
	}
	return n.norm.params()
}

// Forward normalizes every token of a (T, d) or (B, T, d) input.
func (n *LayerNorm) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if n.norm == nil {
		return nil, errNotValidated
	}
	return n.norm.forward(run, inputs, true)
}

// TokenWise marks the layer as token-wise for incremental decoding.
func (n *LayerNorm) TokenWise() {}

// tokenNorm is the engine of norm.layer and norm.rms: a per-token
// normalization with an optional scale (weight) and shift (bias).
type tokenNorm struct {
	d            int
	eps          float64
	weight, bias *tensor.Dense // nil when absent
}

// newTokenNorm validates d and eps and allocates the affine parameters.
func newTokenNorm(a paramAlloc, d int, eps float64, weight, bias bool) (*tokenNorm, error) {
	if err := positive("d", d); err != nil {
		return nil, err
	}
	if !(eps >= 0) || math.IsInf(eps, 0) {
		return nil, fmt.Errorf("eps must be a finite number ≥ 0, got %g", eps)
	}
	n := &tokenNorm{d: d, eps: eps}
	var err error
	if weight {
		if n.weight, err = a.zeros("weight", d); err != nil {
			return nil, err
		}
	}
	if bias {
		if n.bias, err = a.zeros("bias", d); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// params lists weight (ones) and bias (zeros), those that exist.
func (n *tokenNorm) params() []registry.Param {
	var ps []registry.Param
	if n.weight != nil {
		ps = append(ps, registry.Param{Name: "weight", Value: n.weight, Init: registry.ConstantInit(1)})
	}
	if n.bias != nil {
		ps = append(ps, registry.Param{Name: "bias", Value: n.bias, Init: registry.ConstantInit(0)})
	}
	return ps
}

// forward normalizes each token: centered (LayerNorm) divides x − mean by
// the standard deviation, otherwise (RMSNorm) x by the root mean square.
func (n *tokenNorm) forward(run *registry.Run, inputs []*tensor.Dense, centered bool) (*tensor.Dense, error) {
	in, err := singleInput(inputs)
	if err != nil {
		return nil, err
	}
	if err := in.expectWidth("d", n.d); err != nil {
		return nil, err
	}
	var weight, bias []float32
	if n.weight != nil {
		weight = floats(n.weight)
	}
	if n.bias != nil {
		bias = floats(n.bias)
	}
	out, data := in.newOutput(run, n.d)
	if centered && weight != nil {
		// nn.LayerNorm: the vector kernel, split across the cores, with
		// each value's arithmetic in float64 and one rounding.
		kernels.LayerNorm32(data, in.data[:in.rows()*n.d], nil, weight, bias, n.d, n.eps)
		return out, nil
	}
	for r := range in.rows() {
		x := in.data[r*n.d : (r+1)*n.d]
		y := data[r*n.d : (r+1)*n.d]
		var mean float64
		if centered {
			for _, v := range x {
				mean += float64(v)
			}
			mean /= float64(n.d)
		}
		var ss float64
		for _, v := range x {
			dv := float64(v) - mean
			ss += dv * dv
		}
		inv := 1 / math.Sqrt(ss/float64(n.d)+n.eps)
		for j, v := range x {
			z := float32((float64(v) - mean) * inv)
			if weight != nil {
				z *= weight[j]
			}
			if bias != nil {
				z += bias[j]
			}
			y[j] = z
		}
	}
	return out, nil
}

// OutputShape is the input's shape.
func (n *LayerNorm) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "d", n.D)
}

// FLOPs returns 0: normalization is elementwise.
func (n *LayerNorm) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }
