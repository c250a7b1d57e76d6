package cosine

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/attnmath"
	"github.com/attnrun/attnrun/registry"
)

// This file holds the forward pass's arithmetic on the tensors' backing
// []float32: the projections and the attention are attnmath's, attnrun's
// public math API over its own kernels; only F.normalize is written out.

// maxElements bounds a tensor whose size comes from the config or the
// input (a parameter, the projections, the attention weights), so that an
// absurd size is an error instead of an exhausted machine: 1 GiB of float32.
const maxElements = 1 << 28

// normEps is F.normalize's default eps: a vector is divided by
// max(‖x‖₂, normEps), so a zero vector stays zero instead of becoming NaN.
const normEps = 1e-12

// checkSize fails if a rows × width tensor called name would exceed maxElements.
func checkSize(name string, rows, width int) error {
	if rows <= 0 || width <= 0 || rows > maxElements/width {
		return fmt.Errorf("%s of %d × %d exceed the limit of %d elements", name, rows, width, maxElements)
	}
	return nil
}

// tokens is a layer input viewed as B sequences of T tokens of width D:
// token t of sequence b is row b·T+t of data.
type tokens struct {
	B, T, D int
	// batched records whether the input was (B, T, d), so that the output
	// keeps the input's rank.
	batched bool
	data    []float32
}

// readTokens checks that x is a non-empty float32 (T, dIn) or (B, T, dIn)
// tensor and returns its rows. A strided view (a slice, a transpose) is
// copied to row-major order first, since the loops read the backing array.
func readTokens(x *tensor.Dense, dIn int) (tokens, error) {
	if x == nil {
		return tokens{}, fmt.Errorf("input is nil: want a (T, d_in) or (B, T, d_in) float32 tensor")
	}
	shape := x.Shape()
	if len(shape) != 2 && len(shape) != 3 {
		return tokens{}, fmt.Errorf("input shape %v: want (T, d_in) or (B, T, d_in)", shape)
	}
	if shape.TotalSize() == 0 {
		return tokens{}, fmt.Errorf("input shape %v has an empty dimension", shape)
	}
	if x.Dtype() != tensor.Float32 {
		return tokens{}, fmt.Errorf("input dtype %v: want float32", x.Dtype())
	}
	if x.RequiresIterator() {
		dense, ok := x.Materialize().(*tensor.Dense)
		if !ok {
			return tokens{}, fmt.Errorf("input view could not be copied to a dense tensor")
		}
		x = dense
	}
	t := tokens{B: 1, T: shape[0], D: shape[1]}
	if len(shape) == 3 {
		t = tokens{B: shape[0], T: shape[1], D: shape[2], batched: true}
	}
	if t.D != dIn {
		return tokens{}, fmt.Errorf("d_in mismatch: input last dim %d, layer expects d_in %d", t.D, dIn)
	}
	data, ok := x.Data().([]float32)
	if !ok || len(data) < shape.TotalSize() {
		return tokens{}, fmt.Errorf("input shape %v: backing array too short", shape)
	}
	t.data = data[:shape.TotalSize()]
	return t, nil
}

// shape is the shape of an output with the input's rank and leading
// dimensions and the given last dimension.
func (t tokens) shape(width int) []int {
	if t.batched {
		return []int{t.B, t.T, width}
	}
	return []int{t.T, width}
}

// linear is the storage of an nn.Linear: weight (out, in) as PyTorch stores
// it, and an optional bias (out).
type linear struct {
	in, out      int
	weight, bias *tensor.Dense
}

// newLinear allocates a zeroed nn.Linear(in, out, bias).
func newLinear(in, out int, bias bool) (*linear, error) {
	if err := checkSize("projection weight", out, in); err != nil {
		return nil, err
	}
	l := &linear{in: in, out: out, weight: zeros(out, in)}
	if bias {
		l.bias = zeros(out)
	}
	return l, nil
}

// zeros allocates a zeroed float32 tensor of the given shape.
func zeros(shape ...int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]float32, tensor.Shape(shape).TotalSize())))
}

// params lists weight then bias under name, with nn.Linear's init: both
// drawn from U(-1/√in, 1/√in), as kaiming_uniform_(a=√5) works out to.
func (l *linear) params(name string) []registry.Param {
	ps := []registry.Param{{Name: name + ".weight", Value: l.weight, Init: registry.LinearInit(l.in)}}
	if l.bias != nil {
		ps = append(ps, registry.Param{Name: name + ".bias", Value: l.bias, Init: registry.LinearBiasInit(l.in)})
	}
	return ps
}

// apply returns x Wᵀ + b for rows rows of width in: a new rows × out slice.
func (l *linear) apply(x []float32, rows int) ([]float32, error) {
	var b []float32
	if l.bias != nil {
		b = l.bias.Data().([]float32)
	}
	y := make([]float32, rows*l.out)
	return y, attnmath.Linear(y, x, l.weight.Data().([]float32), b, rows, l.in, l.out)
}

// project returns the normalized queries and keys and the values of the
// rows tokens of x, each rows × d_out.
func (c *Cosine) project(x []float32, rows int) (q, k, v []float32, err error) {
	if q, err = c.query.apply(x, rows); err != nil {
		return nil, nil, nil, err
	}
	if k, err = c.key.apply(x, rows); err != nil {
		return nil, nil, nil, err
	}
	if v, err = c.value.apply(x, rows); err != nil {
		return nil, nil, nil, err
	}
	return normalizeRows(q, c.query.out), normalizeRows(k, c.key.out), v, nil
}

// normalizeRows divides each row of x (width wide) by its L2 norm clamped
// below at normEps, as F.normalize(x, p=2, dim=-1) does, and returns x.
// The squares are summed in float64, so the only rounding is the final one.
func normalizeRows(x []float32, width int) []float32 {
	for start := 0; start < len(x); start += width {
		row := x[start : start+width]
		var squares float64
		for _, v := range row {
			squares += float64(v) * float64(v)
		}
		norm := math.Max(math.Sqrt(squares), normEps)
		for i, v := range row {
			row[i] = float32(float64(v) / norm)
		}
	}
	return x
}

// attention is the attnmath description of one head's scaled cosine
// attention of queries against keys; the queries are the last tokens of
// the keys' sequence, which is where the causal frontier falls.
func (c *Cosine) attention(batch, queries, keys int, causal bool, weights []float32) attnmath.Attention {
	return attnmath.Attention{
		Batch: batch, Heads: 1, Queries: queries, Keys: keys, HeadDim: c.query.out,
		Scale: float32(c.Scale), Causal: causal, Weights: weights,
	}
}
