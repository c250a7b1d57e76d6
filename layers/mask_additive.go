package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// AdditiveMask is mask.additive: the (B, T) attention_mask of 1s and 0s,
// int64 or float32, as the mask attention.sdpa adds to its scores with
// mask: additive, float32 (B, 1, 1, T): (1 - m) * fill, as Hugging Face's
// get_extended_attention_mask computes it (fill -10000, or the dtype's
// minimum). Unlike mask.padding's keep mask, a sequence of padding alone
// gets uniform weights from it, not none: the graph's own numbers.
type AdditiveMask struct {
	// Fill is what a padding key gets added to its scores (-10000 in
	// BERT's exports).
	Fill float64 `yaml:"fill"`
}

var (
	_ registry.FLOPCounter  = (*AdditiveMask)(nil)
	_ registry.OutputShaper = (*AdditiveMask)(nil)
	_ registry.TokenWise    = (*AdditiveMask)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "mask.additive",
		Summary: "a (B, T) attention_mask as the additive (B, 1, 1, T) mask (1 - m) * fill, Hugging Face's extended attention mask",
		New:     func() registry.Layer { return &AdditiveMask{} },
	})
}

// Validate checks that fill is a finite number.
func (p *AdditiveMask) Validate() error {
	if math.IsNaN(p.Fill) || math.IsInf(p.Fill, 0) || math.Abs(p.Fill) > math.MaxFloat32 {
		return fmt.Errorf("fill %g must be a finite float32", p.Fill)
	}
	return nil
}

// Params returns nil: the layer has no parameters.
func (p *AdditiveMask) Params() []registry.Param { return nil }

// Forward maps the (B, T) attention_mask to (1 - m) * fill, (B, 1, 1, T),
// in float32 as PyTorch computes it.
func (p *AdditiveMask) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	fill := float32(p.Fill)
	return keyMaskFrom(run, inputs, func(m float32) float32 { return (1 - m) * fill })
}

// TokenWise marks mask.additive as token-wise: each key's entry depends on
// that key's attention_mask value alone.
func (p *AdditiveMask) TokenWise() {}

// FLOPs returns 0: the layer's arithmetic is elementwise.
func (p *AdditiveMask) FLOPs(inputs []tensor.Shape) (int64, error) {
	return noFLOPs(p.OutputShape(inputs))
}

// OutputShape is (B, 1, 1, T) for a (B, T) attention_mask.
func (p *AdditiveMask) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return keyMaskShape(inputs)
}
