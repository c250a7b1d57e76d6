package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// MeanPool is pool.mean: the mean of each sequence's token vectors, (B, T,
// d) or (T, d) to (B, d) or (1, d), counting only the tokens an optional
// attention mask, (B, T) or (T) of int64 or float32, marks with non-zero
// weights. It is sentence-transformers' Pooling(pooling_mode="mean"):
//
//	m = mask.unsqueeze(-1).float()
//	sum(x * m, 1) / clamp(sum(m, 1), min=1e-9)
//
// so a fully masked sequence pools to zeros, not NaN. A sentence embedding
// follows it with nn.normalize.
type MeanPool struct {
	noConfig `yaml:"-"`
}

var (
	_ registry.FLOPCounter  = (*MeanPool)(nil)
	_ registry.OutputShaper = (*MeanPool)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "pool.mean",
		Summary: "mean of each sequence's tokens over its attention mask (sentence-transformers' mean pooling)",
		New:     func() registry.Layer { return &MeanPool{} },
	})
}

// minMaskSum is sentence-transformers' clamp on the mask's sum.
const minMaskSum = 1e-9

// Forward pools the token stream, inputs[0], over the mask inputs[1] if
// given.
func (p *MeanPool) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if len(inputs) != 1 && len(inputs) != 2 {
		return nil, fmt.Errorf("takes the tokens and an optional attention mask, got %d inputs", len(inputs))
	}
	x, err := readSeqs(inputs[0])
	if err != nil {
		return nil, err
	}
	weights := make([]float64, x.rows())
	for i := range weights {
		weights[i] = 1
	}
	if len(inputs) == 2 {
		if weights, err = poolMask(inputs[1], x); err != nil {
			return nil, err
		}
	}
	out := make([]float32, x.B*x.D)
	sum := make([]float64, x.D)
	for b := range x.B {
		clear(sum)
		count := 0.0
		for t := range x.T {
			w := weights[b*x.T+t]
			if w == 0 {
				continue
			}
			count += w
			row := x.data[(b*x.T+t)*x.D : (b*x.T+t+1)*x.D]
			for j, v := range row {
				sum[j] += float64(v) * w
			}
		}
		// PyTorch divides the float32 sums by the float32 count.
		count32 := max(float32(count), minMaskSum)
		for j, s := range sum {
			out[b*x.D+j] = float32(s) / count32
		}
	}
	return tensor.New(tensor.WithShape(x.B, x.D), tensor.WithBacking(out)), nil
}

// poolMask reads the attention mask of tokens x, (B, T) or (T), int64 or
// float32, as one weight per token.
func poolMask(mask *tensor.Dense, x seqs) ([]float64, error) {
	if mask == nil {
		return nil, fmt.Errorf("attention mask is nil")
	}
	shape := mask.Shape()
	if want := maskShape(x); !shape.Eq(want) {
		return nil, fmt.Errorf("attention mask shape %s: want %s, one weight per token", fmtShape(shape), fmtShape(want))
	}
	mask, err := rowMajor("attention mask", mask)
	if err != nil {
		return nil, err
	}
	weights := make([]float64, x.rows())
	switch data := mask.Data().(type) {
	case []int64:
		for i := range weights {
			weights[i] = float64(data[i])
		}
	case []float32:
		for i := range weights {
			weights[i] = float64(data[i])
		}
	default:
		return nil, fmt.Errorf("attention mask dtype %v: want int64 or float32", mask.Dtype())
	}
	return weights, nil
}

// maskShape is the shape of the attention mask of tokens x: (B, T), or
// (T) for one unbatched sequence.
func maskShape(x seqs) tensor.Shape {
	if !x.batched {
		return tensor.Shape{x.T}
	}
	return tensor.Shape{x.B, x.T}
}

// FLOPs returns 0: pooling is elementwise work.
func (p *MeanPool) FLOPs(inputs []tensor.Shape) (int64, error) { return noFLOPs(p.OutputShape(inputs)) }

// OutputShape is (B, d), or (1, d) for a (T, d) input.
func (p *MeanPool) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) != 1 && len(inputs) != 2 {
		return nil, fmt.Errorf("takes the tokens and an optional attention mask, got %d inputs", len(inputs))
	}
	x, err := shapeSeqs(inputs[0])
	if err != nil {
		return nil, err
	}
	if len(inputs) == 2 {
		if want := maskShape(x); !inputs[1].Eq(want) {
			return nil, fmt.Errorf("attention mask shape %s: want %s, one weight per token", fmtShape(inputs[1]), fmtShape(want))
		}
	}
	return tensor.Shape{x.B, x.D}, nil
}
