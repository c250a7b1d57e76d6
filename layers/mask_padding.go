package layers

import (
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// PaddingMask is mask.padding: it turns the attention_mask a Hugging Face
// encoder takes, (B, T) of 1 for tokens and 0 for padding, int64 or
// float32, into the key-padding mask attention.sdpa reads with mask: bool
// and mask_polarity: keep: float32 (B, 1, 1, T), 1 where the key is a
// token. It broadcasts over heads and queries, so every query (padding
// ones too, as in Hugging Face) attends to the sequence's tokens only.
type PaddingMask struct {
	noConfig `yaml:"-"`
}

var (
	_ registry.FLOPCounter  = (*PaddingMask)(nil)
	_ registry.OutputShaper = (*PaddingMask)(nil)
	_ registry.TokenWise    = (*PaddingMask)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "mask.padding",
		Summary: "a (B, T) attention_mask of 1s and 0s as the (B, 1, 1, T) keep mask attention reads",
		New:     func() registry.Layer { return &PaddingMask{} },
	})
}

// Forward maps the (B, T) attention_mask to the (B, 1, 1, T) keep mask:
// 1 where it is non-zero, 0 elsewhere.
func (p *PaddingMask) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	return keyMaskFrom(run, inputs, func(m float32) float32 {
		if m != 0 {
			return 1
		}
		return 0
	})
}

// TokenWise marks mask.padding as token-wise: each key's entry depends on
// that key's attention_mask value alone, so a decoding step, given the
// mask over every token so far (registry.Stepper's rule for masks), needs
// no state.
func (p *PaddingMask) TokenWise() {}

// FLOPs returns 0: the layer compares and copies.
func (p *PaddingMask) FLOPs(inputs []tensor.Shape) (int64, error) {
	return noFLOPs(p.OutputShape(inputs))
}

// OutputShape is (B, 1, 1, T) for a (B, T) attention_mask.
func (p *PaddingMask) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return keyMaskShape(inputs)
}
