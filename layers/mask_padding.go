package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

func init() {
	registry.Register(registry.Info{
		ID:      "mask.padding",
		Summary: "a (B, T) attention_mask of 1s and 0s as the (B, 1, 1, T) keep mask attention reads",
		New:     func() registry.Layer { return &PaddingMask{} },
	})
}

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

// Forward maps the (B, T) attention_mask to the (B, 1, 1, T) keep mask:
// 1 where it is non-zero, 0 elsewhere.
func (p *PaddingMask) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if len(inputs) != 1 || inputs[0] == nil {
		return nil, fmt.Errorf("takes 1 input, the attention_mask, got %d", len(inputs))
	}
	mask := inputs[0]
	if _, err := p.OutputShape([]tensor.Shape{mask.Shape()}); err != nil {
		return nil, err
	}
	mask, err := rowMajor("attention_mask", mask)
	if err != nil {
		return nil, err
	}
	b, t := mask.Shape()[0], mask.Shape()[1]
	keep := make([]float32, b*t)
	switch data := mask.Data().(type) {
	case []int64:
		for i := range keep {
			if data[i] != 0 {
				keep[i] = 1
			}
		}
	case []float32:
		for i := range keep {
			if data[i] != 0 {
				keep[i] = 1
			}
		}
	default:
		return nil, fmt.Errorf("attention_mask dtype %v: want int64 or float32", mask.Dtype())
	}
	return tensor.New(tensor.WithShape(b, 1, 1, t), tensor.WithBacking(keep)), nil
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
