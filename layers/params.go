package layers

import (
	"errors"
	"fmt"

	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// maxElements bounds one tensor whose size comes from the config (a
// parameter, or the attention weights a hook asks for): 1 GiB of float32,
// so that an absurd config fails with an error instead of exhausting memory.
const maxElements = 1 << 28

// errNotValidated is returned by Forward on a layer whose Validate has not
// succeeded: its parameters do not exist yet.
var errNotValidated = errors.New("layer used before a successful Validate")

// newZeros allocates a zeroed float32 tensor whose size comes from the
// config; name says what it is in the error for a shape above the limit.
func newZeros(name string, shape ...int) (*tensor.Dense, error) {
	n := 1
	for _, d := range shape {
		if d <= 0 || n > maxElements/d {
			return nil, fmt.Errorf("%s of shape %s exceeds the limit of %d elements",
				name, fmtShape(shape), maxElements)
		}
		n *= d
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]float32, n))), nil
}

// floats is the backing array of a parameter or layer-made tensor.
func floats(t *tensor.Dense) []float32 { return t.Data().([]float32) }

// join builds a state_dict name: join("heads.0", "W_query") is
// "heads.0.W_query"; an empty prefix adds nothing.
func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// projection maps rows of width in to rows of width out: an nn.Linear or a
// bare weight matrix.
type projection interface {
	// apply writes the projection of rows of x (dense, width in) to y
	// (dense, width out).
	apply(y, x []float32, rows int)
	// params lists the projection's parameters under the given name.
	params(name string) []registry.Param
}

// linearWeights is the storage of an nn.Linear: weight (out, in) as PyTorch
// stores it, and an optional bias (out).
type linearWeights struct {
	in, out      int
	weight, bias *tensor.Dense
}

var _ projection = (*linearWeights)(nil)

// newLinearWeights allocates a zeroed nn.Linear called name.
func newLinearWeights(name string, in, out int, bias bool) (*linearWeights, error) {
	l := &linearWeights{in: in, out: out}
	var err error
	if l.weight, err = newZeros(join(name, "weight"), out, in); err != nil {
		return nil, err
	}
	if bias {
		if l.bias, err = newZeros(join(name, "bias"), out); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *linearWeights) apply(y, x []float32, rows int) {
	var bias []float32
	if l.bias != nil {
		bias = floats(l.bias)
	}
	kernels.Linear(y, x, floats(l.weight), bias, rows, l.in, l.out)
}

// params lists weight then bias, initialized as nn.Linear does.
func (l *linearWeights) params(name string) []registry.Param {
	ps := []registry.Param{{Name: join(name, "weight"), Value: l.weight, Init: registry.LinearInit(l.in)}}
	if l.bias != nil {
		ps = append(ps, registry.Param{Name: join(name, "bias"), Value: l.bias, Init: registry.LinearBiasInit(l.in)})
	}
	return ps
}

// matrixWeights is a bare nn.Parameter of shape (in, out) applied as x @ W,
// as the seeds' SelfAttention_v1 does; initialized like torch.rand.
type matrixWeights struct {
	in, out int
	w       *tensor.Dense
}

var _ projection = (*matrixWeights)(nil)

// newMatrixWeights allocates a zeroed (in, out) matrix called name.
func newMatrixWeights(name string, in, out int) (*matrixWeights, error) {
	w, err := newZeros(name, in, out)
	if err != nil {
		return nil, err
	}
	return &matrixWeights{in: in, out: out, w: w}, nil
}

func (m *matrixWeights) apply(y, x []float32, rows int) {
	kernels.Gemm(false, false, rows, m.out, m.in, 1, x, m.in, floats(m.w), m.out, 0, y, m.out)
}

func (m *matrixWeights) params(name string) []registry.Param {
	return []registry.Param{{Name: name, Value: m.w, Init: registry.UniformInit(0, 1)}}
}

// qkv is the query, key and value projections of an attention layer, in the
// order the seeds' modules register them (W_query, W_key, W_value).
type qkv struct {
	query, key, value projection
	in, out           int
}

// newQKV allocates three projections from in to out: nn.Linear ones, or
// bare matrices when matrix is set.
func newQKV(prefix string, in, out int, matrix, bias bool) (qkv, error) {
	var ps [3]projection
	for i, name := range []string{"W_query", "W_key", "W_value"} {
		var err error
		if matrix {
			ps[i], err = newMatrixWeights(join(prefix, name), in, out)
		} else {
			ps[i], err = newLinearWeights(join(prefix, name), in, out, bias)
		}
		if err != nil {
			return qkv{}, err
		}
	}
	return qkv{query: ps[0], key: ps[1], value: ps[2], in: in, out: out}, nil
}

// params lists the three projections' parameters under prefix.
func (p qkv) params(prefix string) []registry.Param {
	ps := p.query.params(join(prefix, "W_query"))
	ps = append(ps, p.key.params(join(prefix, "W_key"))...)
	return append(ps, p.value.params(join(prefix, "W_value"))...)
}

// project returns the queries, keys and values of rows of x, each dense
// with width out.
func (p qkv) project(x []float32, rows int) (q, k, v []float32) {
	q = make([]float32, rows*p.out)
	k = make([]float32, rows*p.out)
	v = make([]float32, rows*p.out)
	p.query.apply(q, x, rows)
	p.key.apply(k, x, rows)
	p.value.apply(v, x, rows)
	return q, k, v
}
