package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// LengthsMask is mask.lengths: the number of tokens of each sequence, (B)
// of int64 or float32 (a count), as the keep mask attention.sdpa reads
// with mask: bool and mask_polarity: keep, float32 (B, 1, 1, T), 1 for the
// first lengths[b] keys of sequence b and 0 for the padding after them.
// Its second input is the token stream (B, T, d), which gives T. ONNX
// Runtime's Attention op takes such a mask_index; its tests write it
// unfused as a comparison of the lengths with the key positions.
type LengthsMask struct{}

var (
	_ registry.FLOPCounter  = (*LengthsMask)(nil)
	_ registry.OutputShaper = (*LengthsMask)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "mask.lengths",
		Summary: "sequence lengths (B) as the (B, 1, 1, T) keep mask attention reads (ONNX Runtime's 1-D mask_index)",
		New:     func() registry.Layer { return &LengthsMask{} },
	})
}

// Validate has nothing to check: the layer has no configuration.
func (p *LengthsMask) Validate() error { return nil }

// Params returns nil: the layer has no parameters.
func (p *LengthsMask) Params() []registry.Param { return nil }

// Forward maps the lengths, inputs[0], to the keep mask over the keys of
// the tokens inputs[1].
func (p *LengthsMask) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if len(inputs) != 2 || inputs[0] == nil || inputs[1] == nil {
		return nil, fmt.Errorf("takes 2 inputs, the lengths and the tokens, got %d", len(inputs))
	}
	shape, err := p.OutputShape([]tensor.Shape{inputs[0].Shape(), inputs[1].Shape()})
	if err != nil {
		return nil, err
	}
	lengths, err := rowMajor("lengths", inputs[0])
	if err != nil {
		return nil, err
	}
	b, t := shape[0], shape[3]
	counts := make([]int64, b)
	switch data := lengths.Data().(type) {
	case []int64:
		copy(counts, data)
	case []float32:
		for i, v := range data {
			counts[i] = int64(v)
		}
	default:
		return nil, fmt.Errorf("lengths dtype %v: want int64 or float32", lengths.Dtype())
	}
	keep := make([]float32, b*t)
	for i, n := range counts {
		for j := 0; j < t && int64(j) < n; j++ {
			keep[i*t+j] = 1
		}
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(keep)), nil
}

// FLOPs returns 0: the layer compares.
func (p *LengthsMask) FLOPs(inputs []tensor.Shape) (int64, error) {
	return noFLOPs(p.OutputShape(inputs))
}

// OutputShape is (B, 1, 1, T) for lengths (B) and tokens (B, T, d).
func (p *LengthsMask) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) != 2 {
		return nil, fmt.Errorf("takes 2 inputs, the lengths and the tokens, got %d", len(inputs))
	}
	l, x := inputs[0], inputs[1]
	if len(l) != 1 || len(x) != 3 || l[0] != x[0] || x[1] <= 0 {
		return nil, fmt.Errorf("lengths %s and tokens %s: want (B) and (B, T, d)", fmtShape(l), fmtShape(x))
	}
	return tensor.Shape{x[0], 1, 1, x[1]}, nil
}
