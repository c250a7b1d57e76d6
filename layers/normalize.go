package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Normalize is nn.normalize: every vector along the last axis divided by
// its Euclidean length, x / max(‖x‖₂, eps). It equals
// torch.nn.functional.normalize(x, p=2, dim=-1, eps) and
// sentence-transformers' Normalize module, which makes pooled sentence
// embeddings unit vectors.
type Normalize struct {
	noParams `yaml:"-"` // the layer has no parameters.
	// Eps bounds the divisor from below (default 1e-12, as F.normalize), so
	// a zero vector stays zero.
	Eps float64 `yaml:"eps"`
}

var (
	_ registry.TokenWise    = (*Normalize)(nil)
	_ registry.FLOPCounter  = (*Normalize)(nil)
	_ registry.OutputShaper = (*Normalize)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "nn.normalize",
		Summary: "L2 normalization of the last axis (F.normalize, sentence-transformers' Normalize)",
		New:     func() registry.Layer { return &Normalize{Eps: 1e-12} },
	})
}

// Validate checks that eps is finite and not negative.
func (n *Normalize) Validate() error {
	if n.Eps < 0 || math.IsNaN(n.Eps) || math.IsInf(n.Eps, 0) {
		return fmt.Errorf("eps %g must be finite and not negative", n.Eps)
	}
	return nil
}

// Forward normalizes the last axis of a float32 tensor of any rank ≥ 1.
func (n *Normalize) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	x, err := floatInput(inputs)
	if err != nil {
		return nil, err
	}
	in := x.Float32s()
	d := x.Shape()[x.Dims()-1]
	out := make([]float32, len(in))
	if d > 0 {
		for r := 0; r < len(in)/d; r++ {
			row := in[r*d : (r+1)*d]
			var ss float64
			for _, v := range row {
				ss += float64(v) * float64(v)
			}
			// PyTorch rounds the norm to float32 before clamping and dividing.
			norm := max(float32(math.Sqrt(ss)), float32(n.Eps))
			for j, v := range row {
				out[r*d+j] = v / norm
			}
		}
	}
	return tensor.New(tensor.WithShape(x.Shape().Clone()...), tensor.WithBacking(out)), nil
}

// TokenWise marks nn.normalize as token-wise: each vector is normalized on
// its own.
func (n *Normalize) TokenWise() {}

// FLOPs returns 0: normalization is elementwise work.
func (n *Normalize) FLOPs(inputs []tensor.Shape) (int64, error) {
	return noFLOPs(n.OutputShape(inputs))
}

// OutputShape is the input's shape.
func (n *Normalize) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return floatInputShape(inputs)
}
