package cosine

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// This file holds the forward pass's arithmetic as plain loops over the
// tensors' backing []float32. attnrun's own kernels live in an internal
// package that other modules cannot import, and at the sizes a cosine layer
// is tried on, clear loops are plenty. Sums accumulate in float64 so that
// the only rounding is the final one to float32.

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
func (l *linear) apply(x []float32, rows int) []float32 {
	w := l.weight.Data().([]float32)
	var b []float32
	if l.bias != nil {
		b = l.bias.Data().([]float32)
	}
	y := make([]float32, rows*l.out)
	for r := 0; r < rows; r++ {
		xr := x[r*l.in : (r+1)*l.in]
		for o := 0; o < l.out; o++ {
			sum := dot(xr, w[o*l.in:(o+1)*l.in])
			if b != nil {
				sum += float64(b[o])
			}
			y[r*l.out+o] = float32(sum)
		}
	}
	return y
}

// normalizeRows divides each row of x (width wide) by its L2 norm clamped
// below at normEps, as F.normalize(x, p=2, dim=-1) does, and returns x.
func normalizeRows(x []float32, width int) []float32 {
	for start := 0; start < len(x); start += width {
		row := x[start : start+width]
		norm := math.Max(math.Sqrt(dot(row, row)), normEps)
		for i, v := range row {
			row[i] = float32(float64(v) / norm)
		}
	}
	return x
}

// dot is the inner product of two equally long vectors, summed in float64.
func dot(a, b []float32) float64 {
	var sum float64
	for i, v := range a {
		sum += float64(v) * float64(b[i])
	}
	return sum
}

// sequence is one sequence's normalized queries and keys, values, output
// rows and, if wanted, attention weights (queries × keys), each row-major
// from the sequence's first row. q, k, v and out are width wide. The
// queries are the last tokens of the keys' sequence: query i sits at
// position keys−queries+i, which matters to the causal mask. A full pass
// has as many queries as keys; an incremental step has the new tokens'
// queries against every key so far.
type sequence struct {
	q, k, v, out  []float32
	weights       []float32 // nil when no one wants the weights
	width         int
	queries, keys int
}

// attend writes the output row of every query of the sequence: the
// softmax of its scaled cosine scores against the visible keys (all of
// them, or those up to its own position when causal), times the values.
// Masked keys are skipped rather than set to -inf: exp(-inf) is 0, so the
// result is the same, and their weights stay 0.
func (s sequence) attend(scale float64, causal bool) {
	probs := make([]float64, s.keys)
	past := s.keys - s.queries
	for i := 0; i < s.queries; i++ {
		visible := s.keys
		if causal {
			visible = past + i + 1
		}
		p := probs[:visible]
		query := s.q[i*s.width : (i+1)*s.width]
		for j := range p {
			p[j] = scale * dot(query, s.k[j*s.width:(j+1)*s.width])
		}
		softmax(p)
		for o := 0; o < s.width; o++ {
			var sum float64
			for j, pj := range p {
				sum += pj * float64(s.v[j*s.width+o])
			}
			s.out[i*s.width+o] = float32(sum)
		}
		if s.weights != nil {
			row := s.weights[i*s.keys : (i+1)*s.keys]
			for j, pj := range p {
				row[j] = float32(pj)
			}
		}
	}
}

// softmax turns scores into probabilities in place. Subtracting the
// largest score first keeps exp from overflowing without changing the result.
func softmax(p []float64) {
	largest := math.Inf(-1)
	for _, v := range p {
		largest = math.Max(largest, v)
	}
	var sum float64
	for i, v := range p {
		p[i] = math.Exp(v - largest)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
}
