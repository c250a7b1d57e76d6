package layers

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// maxElements bounds one tensor a forward pass allocates because its
// inputs or the config say so (the attention weights a hook asks for, an
// ALiBi bias): 1 GiB of float32, so that an absurd request fails with an
// error instead of exhausting memory. Parameters are bounded by the
// model's memory budget instead (provision).
const maxElements = 1 << 28

// errNotValidated is returned by Forward on a layer whose Validate has not
// succeeded: its parameters do not exist yet.
var errNotValidated = errors.New("layer used before a successful Validate")

// newZeros allocates a zeroed float32 tensor whose size comes from the
// config; name says what it is in the error for a shape above the limit.
func newZeros(name string, shape ...int) (*tensor.Dense, error) {
	n, err := elements(name, shape...)
	if err != nil {
		return nil, err
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]float32, n))), nil
}

// elements returns the number of elements of a tensor whose size comes
// from the config, or an error naming it if the shape is above the limit.
func elements(name string, shape ...int) (int, error) {
	n := 1
	for _, d := range shape {
		if d <= 0 || n > maxElements/d {
			return 0, fmt.Errorf("%s of shape %s exceeds the limit of %d elements",
				name, fmtShape(shape), maxElements)
		}
		n *= d
	}
	return n, nil
}

// A layer with parameters builds itself with a prepare function taking a
// paramAlloc, run twice: planning, it lists the parameters' shapes and
// allocates nothing (registry.Provisioner's PlanParams); then, once their
// bytes are reserved from the model's budget, allocating (Provision). One
// construction path serves both, so the plan cannot drift from what is
// allocated.

// paramAlloc makes a layer's parameter storage, or, when planning, only
// records the shapes asked for and hands out nil.
type paramAlloc struct {
	planned *[]registry.ParamShape // non-nil while planning
	// packs, when set, is where the nn.Linear weights made here register,
	// so that they keep packed copies (see weightPacks); nil for layers
	// without ParamsChanged, whose weights are packed on every product.
	packs *weightPacks
}

// planning reports whether the allocator only records shapes.
func (a paramAlloc) planning() bool { return a.planned != nil }

// zeros returns a zeroed float32 parameter called name of the given shape
// (nil when planning). The shape must be positive in every dimension.
func (a paramAlloc) zeros(name string, shape ...int) (*tensor.Dense, error) {
	data, err := a.floats(name, shape...)
	if data == nil {
		return nil, err
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data)), nil
}

// floats returns zeroed storage for a parameter called name of the given
// shape (nil when planning).
func (a paramAlloc) floats(name string, shape ...int) ([]float32, error) {
	if err := a.plan(name, shape...); err != nil || a.planning() {
		return nil, err
	}
	return make([]float32, budget.Elements(shape)), nil
}

// plan checks a parameter's shape and, when planning, records it.
func (a paramAlloc) plan(name string, shape ...int) error {
	for _, d := range shape {
		if d <= 0 {
			return fmt.Errorf("%s would have shape %s: every dimension must be positive", name, fmtShape(shape))
		}
	}
	if n := budget.Elements(shape); n < 0 || budget.Bytes(n, 4) < 0 {
		return fmt.Errorf("%s of shape %s has more elements than int64 can count", name, fmtShape(shape))
	}
	if a.planning() {
		*a.planned = append(*a.planned, registry.ParamShape{Name: name, Shape: append([]int(nil), shape...)})
	}
	return nil
}

// planParams runs prepare in planning mode and returns the parameters it
// would allocate: a Provisioner's PlanParams.
func planParams[T any](prepare func(paramAlloc) (T, error)) ([]registry.ParamShape, error) {
	shapes := []registry.ParamShape{}
	if _, err := prepare(paramAlloc{planned: &shapes}); err != nil {
		return nil, err
	}
	return shapes, nil
}

// provision plans prepare's parameters, reserves their bytes from mem (a
// budget of budget.DefaultLimit of its own when mem is nil, for a layer
// validated outside a model), and only then runs prepare to allocate them:
// a Provisioner's Provision.
func provision[T any](mem registry.Memory, prepare func(paramAlloc) (T, error)) (T, error) {
	var none T
	shapes, err := planParams(prepare)
	if err != nil {
		return none, err
	}
	if mem == nil {
		mem = budget.New(budget.DefaultLimit)
	}
	if err := registry.ReserveParams(mem, shapes); err != nil {
		return none, err
	}
	return prepare(paramAlloc{})
}

// provisionPacked is provision for a layer that implements ParamsChanged:
// its nn.Linear weights keep packed copies, reserved from mem, in the
// weightPacks it returns as well, which ParamsChanged drops.
func provisionPacked[T any](mem registry.Memory, prepare func(paramAlloc) (T, error)) (T, *weightPacks, error) {
	var none T
	shapes, err := planParams(prepare)
	if err != nil {
		return none, nil, err
	}
	if mem == nil {
		mem = budget.New(budget.DefaultLimit)
	}
	if err := registry.ReserveParams(mem, shapes); err != nil {
		return none, nil, err
	}
	packs := &weightPacks{mem: mem}
	t, err := prepare(paramAlloc{packs: packs})
	if err != nil {
		return none, nil, err
	}
	return t, packs, nil
}

// viewTensor wraps the first volume(shape) floats of data as a tensor of
// that shape, sharing the storage.
func viewTensor(data []float32, shape ...int) *tensor.Dense {
	n := volume(shape)
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data[:n:n]))
}

// floats is the backing array of a parameter or layer-made tensor; nil for
// a nil tensor (a parameter being planned, not allocated).
//
// It reads the storage directly: Data() boxes the slice through reflect,
// two allocations per call, which a forward pass reading its inputs would
// pay layer after layer.
func floats(t *tensor.Dense) []float32 {
	if t == nil {
		return nil
	}
	if t.Dtype() != tensor.Float32 {
		panic(fmt.Sprintf("layers: a %v tensor read as float32", t.Dtype()))
	}
	return t.Float32s()
}

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
	// applyInto writes the projection of rows of x (dense, width in) to
	// the first out columns of y, whose rows are ldy apart: a column block
	// of a wider buffer, with no copy.
	applyInto(y []float32, ldy int, x []float32, rows int)
	// params lists the projection's parameters under the given name.
	params(name string) []registry.Param
}

// linearWeights is the storage of an nn.Linear: weight (out, in) as PyTorch
// stores it, and an optional bias (out).
type linearWeights struct {
	in, out      int
	weight, bias *tensor.Dense
	// w and b are the backing arrays of weight and bias (b is nil without
	// a bias), kept so that a forward pass need not call Data(), which
	// allocates. Loading weights writes into them; nothing replaces them.
	// Every linearWeights comes from newLinearWeights or viewLinearWeights,
	// which set them.
	w, b []float32
	// packs, if set, lets the weight keep a packed copy, made by the
	// first product long enough to gain from it (packedFor).
	packs  *weightPacks
	packed atomic.Pointer[kernels.PackedB]
}

var _ projection = (*linearWeights)(nil)

// newLinearWeights allocates a zeroed nn.Linear called name.
func newLinearWeights(a paramAlloc, name string, in, out int, bias bool) (*linearWeights, error) {
	l := &linearWeights{in: in, out: out}
	a.packs.add(l)
	var err error
	if l.weight, err = a.zeros(join(name, "weight"), out, in); err != nil {
		return nil, err
	}
	l.w = floats(l.weight)
	if bias {
		if l.bias, err = a.zeros(join(name, "bias"), out); err != nil {
			return nil, err
		}
		l.b = floats(l.bias)
	}
	return l, nil
}

// viewLinearWeights makes an nn.Linear from in to out whose weight and
// bias are views of w and b (bias-free if b is nil).
func viewLinearWeights(in, out int, w, b []float32) *linearWeights {
	l := &linearWeights{in: in, out: out, weight: viewTensor(w, out, in), w: w[: out*in : out*in]}
	if b != nil {
		l.bias, l.b = viewTensor(b, out), b[:out:out]
	}
	return l
}

func (l *linearWeights) apply(y, x []float32, rows int) {
	l.applyInto(y, l.out, x, rows)
}

func (l *linearWeights) applyInto(y []float32, ldy int, x []float32, rows int) {
	p := l.packedFor(rows)
	if p != nil && l.b != nil {
		// Each tile of y starts from the bias as the GEMM computes it.
		kernels.GemmPackedBias(false, rows, 1, x, l.in, p, 1, l.b, y, ldy)
		return
	}
	var beta float32
	if l.b != nil {
		// Start from the bias and let the GEMM add to it: a row copy is a
		// memmove, much cheaper than a separate pass adding it afterwards.
		kernels.FillRows(y, ldy, rows, l.b)
		beta = 1
	}
	if p != nil {
		kernels.GemmPacked(false, rows, 1, x, l.in, p, beta, y, ldy)
		return
	}
	kernels.Gemm(false, true, rows, l.out, l.in, 1, x, l.in, l.w, l.in, beta, y, ldy)
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
	data    []float32 // w's backing array, read without Data()'s allocation
}

var _ projection = (*matrixWeights)(nil)

// newMatrixWeights allocates a zeroed (in, out) matrix called name.
func newMatrixWeights(a paramAlloc, name string, in, out int) (*matrixWeights, error) {
	w, err := a.zeros(name, in, out)
	if err != nil {
		return nil, err
	}
	return &matrixWeights{in: in, out: out, w: w, data: floats(w)}, nil
}

func (m *matrixWeights) apply(y, x []float32, rows int) {
	m.applyInto(y, m.out, x, rows)
}

func (m *matrixWeights) applyInto(y []float32, ldy int, x []float32, rows int) {
	kernels.Gemm(false, false, rows, m.out, m.in, 1, x, m.in, m.data, m.out, 0, y, ldy)
}

func (m *matrixWeights) params(name string) []registry.Param {
	return []registry.Param{{Name: name, Value: m.w, Init: registry.UniformInit(0, 1)}}
}

// qkv is the query, key and value projections of an attention layer, in the
// order the seeds' modules register them (W_query, W_key, W_value).
type qkv struct {
	query, key, value projection
	in, out           int
	// fused, for nn.Linear projections, is the three as one nn.Linear of
	// width 3·out: query, key and value are views of its storage (weight
	// rows and bias entries one block after another), so writing a
	// parameter updates it and one GEMM projects all three.
	fused *linearWeights
}

// newQKV allocates three projections from in to out: nn.Linear ones, or
// bare matrices when matrix is set.
func newQKV(a paramAlloc, prefix string, in, out int, matrix, bias bool) (qkv, error) {
	names := []string{join(prefix, "W_query"), join(prefix, "W_key"), join(prefix, "W_value")}
	if !matrix {
		return newFusedQKV(a, names, in, out, bias)
	}
	var ps [3]projection
	for i, name := range names {
		var err error
		if ps[i], err = newMatrixWeights(a, name, in, out); err != nil {
			return qkv{}, err
		}
	}
	return qkv{query: ps[0], key: ps[1], value: ps[2], in: in, out: out}, nil
}

// newFusedQKV allocates the storage of three nn.Linear from in to out,
// called names, as one, and views each of them in it.
func newFusedQKV(a paramAlloc, names []string, in, out int, bias bool) (qkv, error) {
	// Plan the parameters as three nn.Linear, weights then biases in the
	// order Params lists them; the storage is one block of each.
	for _, name := range names {
		if err := a.plan(join(name, "weight"), out, in); err != nil {
			return qkv{}, err
		}
		if bias {
			if err := a.plan(join(name, "bias"), out); err != nil {
				return qkv{}, err
			}
		}
	}
	if a.planning() {
		return qkv{in: in, out: out}, nil
	}
	w := make([]float32, 3*out*in)
	var b []float32
	if bias {
		b = make([]float32, 3*out)
	}
	var ps [3]projection
	for i := range ps {
		var bi []float32
		if bias {
			bi = b[i*out:]
		}
		ps[i] = viewLinearWeights(in, out, w[i*out*in:], bi)
	}
	fused := viewLinearWeights(in, 3*out, w, b)
	a.packs.add(fused) // the views of it are not multiplied by on their own
	return qkv{query: ps[0], key: ps[1], value: ps[2], in: in, out: out, fused: fused}, nil
}

// params lists the three projections' parameters under prefix.
func (p qkv) params(prefix string) []registry.Param {
	ps := p.query.params(join(prefix, "W_query"))
	ps = append(ps, p.key.params(join(prefix, "W_key"))...)
	return append(ps, p.value.params(join(prefix, "W_value"))...)
}

// projectEach writes the queries, keys and values of rows of x to q, k
// and v, each dense with width out.
func (p qkv) projectEach(q, k, v, x []float32, rows int) {
	p.query.apply(q, x, rows)
	p.key.apply(k, x, rows)
	p.value.apply(v, x, rows)
}

// projectInto writes the queries, keys and values of rows of x side by
// side into y, row r holding [q | k | v] (3·out floats) at y[r·ldy:]: a
// single GEMM for nn.Linear projections. The columns of query, key and
// value head h are then h·dh, out+h·dh and 2·out+h·dh, with no copy.
func (p qkv) projectInto(y []float32, ldy int, x []float32, rows int) {
	if p.fused != nil {
		p.fused.applyInto(y, ldy, x, rows)
		return
	}
	for i, proj := range [3]projection{p.query, p.key, p.value} {
		proj.applyInto(y[i*p.out:], ldy, x, rows)
	}
}

// noParams gives a layer without parameters its Params: embedded (with
// the tag `yaml:"-"`, it is no config field) in every layer that has none.
type noParams struct{}

// Params returns nil: the layer has no parameters.
func (noParams) Params() []registry.Param { return nil }

// noConfig gives a layer without configuration or parameters its Validate
// and Params.
type noConfig struct{ noParams }

// Validate accepts the layer: it has no configuration.
func (noConfig) Validate() error { return nil }
