package layers

import (
	"errors"
	"math"
	"slices"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Concat is nn.concat: it concatenates its inputs along the last axis, as
// torch.cat(inputs, dim=-1), e.g. to join heads that each add their own
// position embedding before a shared output projection.
type Concat struct {
	noConfig `yaml:"-"`
}

var (
	_ registry.Layer        = (*Concat)(nil)
	_ registry.OutputShaper = (*Concat)(nil)
	_ registry.FLOPCounter  = (*Concat)(nil)
	_ registry.TokenWise    = (*Concat)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "nn.concat",
		Summary: "concatenate the inputs along the last axis (torch.cat(dim=-1))",
		New:     func() registry.Layer { return &Concat{} },
	})
}

// Forward takes one or more inputs with the same rank and leading
// dimensions; the output's last dimension is the sum of theirs.
func (c *Concat) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	var buf [4]seqs
	ins, err := readAll(buf[:], inputs, "the leading dimensions of", func(first, s seqs) bool {
		return slices.Equal(first.shape(0), s.shape(0))
	})
	if err != nil {
		return nil, err
	}
	width := 0
	for _, in := range ins {
		width += in.D
	}
	out, data := ins[0].newOutput(run, width)
	for r := 0; r < ins[0].rows(); r++ {
		dst := data[r*width : (r+1)*width]
		for _, in := range ins {
			n := copy(dst, in.data[r*in.D:(r+1)*in.D])
			dst = dst[n:]
		}
	}
	return out, nil
}

// OutputShape is the inputs' shape with their widths summed; the leading
// dimensions must agree.
func (c *Concat) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	ins, err := shapeAll(inputs, "the leading dimensions of", func(first, s seqs) bool {
		return first.batched == s.batched && first.B == s.B && first.T == s.T
	})
	if err != nil {
		return nil, err
	}
	width := 0
	for _, in := range ins {
		if width > math.MaxInt-in.D {
			return nil, errors.New("the summed width overflows int")
		}
		width += in.D
	}
	return ins[0].shape(width), nil
}

// FLOPs returns 0: concatenation moves data only.
func (c *Concat) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// TokenWise marks nn.concat as token-wise for incremental decoding.
func (c *Concat) TokenWise() {}
