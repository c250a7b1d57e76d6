package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Transpose is nn.transpose: its input with axes dim0 and dim1 swapped,
// as PyTorch's x.transpose(dim0, dim1). Models that keep their tokens
// sequence-first, (T, B, d) (fairseq, nn.MultiheadAttention without
// batch_first), return attention's (B, T, d) output so.
type Transpose struct {
	// Dim0 is one of the axes swapped (default 0).
	Dim0 int `yaml:"dim0"`
	// Dim1 is the other (default 1).
	Dim1 int `yaml:"dim1"`
}

var (
	_ registry.FLOPCounter  = (*Transpose)(nil)
	_ registry.OutputShaper = (*Transpose)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "nn.transpose",
		Summary: "x.transpose(dim0, dim1): two axes swapped, as (B, T, d) to the (T, B, d) of fairseq and nn.MultiheadAttention",
		New:     func() registry.Layer { return &Transpose{Dim1: 1} },
	})
}

// Validate checks that the axes are two different non-negative ones.
func (t *Transpose) Validate() error {
	if t.Dim0 < 0 || t.Dim1 < 0 || t.Dim0 == t.Dim1 {
		return fmt.Errorf("dim0 %d and dim1 %d must be two different axes, counted from 0", t.Dim0, t.Dim1)
	}
	return nil
}

// Params returns nil: the layer has no parameters.
func (t *Transpose) Params() []registry.Param { return nil }

// Forward copies inputs[0] with the two axes swapped.
func (t *Transpose) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	src, in, shape, err := copiedInput(inputs, t.OutputShape)
	if err != nil {
		return nil, err
	}
	inStrides := make([]int, len(in))
	stride := 1
	for i := len(in) - 1; i >= 0; i-- {
		inStrides[i] = stride
		stride *= in[i]
	}
	dst := make([]float32, len(src))
	idx := make([]int, len(shape)) // the output index, in row-major order
	for k := range dst {
		off := 0
		for ax, i := range idx {
			from := ax
			switch ax {
			case t.Dim0:
				from = t.Dim1
			case t.Dim1:
				from = t.Dim0
			}
			off += i * inStrides[from]
		}
		dst[k] = src[off]
		for ax := len(idx) - 1; ax >= 0; ax-- {
			if idx[ax]++; idx[ax] < shape[ax] {
				break
			}
			idx[ax] = 0
		}
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(dst)), nil
}

// FLOPs returns 0: the layer copies.
func (t *Transpose) FLOPs(inputs []tensor.Shape) (int64, error) {
	return noFLOPs(t.OutputShape(inputs))
}

// OutputShape is the input's shape with the two axes swapped.
func (t *Transpose) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	s := inputs[0]
	if t.Dim0 >= len(s) || t.Dim1 >= len(s) {
		return nil, fmt.Errorf("input shape %s has no axes %d and %d", fmtShape(s), t.Dim0, t.Dim1)
	}
	out := s.Clone()
	out[t.Dim0], out[t.Dim1] = s[t.Dim1], s[t.Dim0]
	return out, nil
}
