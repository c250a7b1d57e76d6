package layers

import (
	"errors"
	"fmt"
	"slices"

	attnarray "github.com/attnrun/attnrun/array"

	"github.com/attnrun/attnrun/internal/attn"
	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// seqs is a layer input viewed as B sequences of T tokens of width D, row
// major: token t of sequence b is row b·T+t of data.
type seqs struct {
	B, T, D int
	// batched records whether the input was (B, T, d); a (T, d) input is
	// one sequence and its output is (T, d') again.
	batched bool
	data    []float32
	// dense is the input itself, or its row-major copy if it was a strided view.
	dense *tensor.Dense
}

// readSeqs checks that x is a non-empty float32 (T, d) or (B, T, d) tensor
// and returns its rows. A strided view (a column slice, a transpose) is
// copied into row-major order first, since the kernels read the backing
// array directly.
func readSeqs(x *tensor.Dense) (seqs, error) {
	if x == nil {
		return seqs{}, errors.New("input is nil: want a (T, d) or (B, T, d) float32 tensor")
	}
	shape := x.Shape()
	s, err := shapeSeqs(shape)
	if err != nil {
		return s, err
	}
	if x.Dtype() != tensor.Float32 {
		return seqs{}, fmt.Errorf("input dtype %v: want float32", x.Dtype())
	}
	x, err = rowMajor("input", x)
	if err != nil {
		return seqs{}, err
	}
	// Float32s reads the backing array without Data()'s allocations; the
	// dtype was checked above.
	data := x.Float32s()
	if len(data) < volume(shape) {
		return seqs{}, fmt.Errorf("input shape %s: backing array holds %d float32 values, want %d",
			fmtShape(shape), len(data), volume(shape))
	}
	s.data, s.dense = data[:volume(shape)], x
	return s, nil
}

// rowMajor returns x itself, or its row-major copy if it is a strided
// view (a column slice, a transpose): the kernels and loops read the
// backing array directly. name says which input it is, for the error.
func rowMajor(name string, x *tensor.Dense) (*tensor.Dense, error) {
	if !x.RequiresIterator() {
		return x, nil
	}
	m, ok := x.Materialize().(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("%s view could not be copied to a dense tensor", name)
	}
	return m, nil
}

// floatInput returns the input of a layer that takes one float32 tensor
// of any rank from 1, in row-major order.
func floatInput(inputs []*tensor.Dense) (*tensor.Dense, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	x := inputs[0]
	if x == nil || x.Dtype() != tensor.Float32 || x.Dims() == 0 {
		return nil, errors.New("input must be a float32 tensor of rank 1 or more")
	}
	return rowMajor("input", x)
}

// copiedInput reads the one float32 input of a layer that copies some of
// its elements (nn.select, nn.transpose): its elements in row-major order,
// its shape, and the output shape outputShape gives it.
func copiedInput(inputs []*tensor.Dense, outputShape func([]tensor.Shape) (tensor.Shape, error)) (src []float32, in, out tensor.Shape, err error) {
	if len(inputs) != 1 || inputs[0] == nil {
		return nil, nil, nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	if out, err = outputShape([]tensor.Shape{inputs[0].Shape()}); err != nil {
		return nil, nil, nil, err
	}
	x, err := rowMajor("input", inputs[0])
	if err != nil {
		return nil, nil, nil, err
	}
	src, ok := x.Data().([]float32)
	if !ok {
		return nil, nil, nil, fmt.Errorf("input dtype %v: want float32", x.Dtype())
	}
	return src, x.Shape(), out, nil
}

// floatInputShape is the output shape of a floatInput layer that keeps
// its input's shape.
func floatInputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) != 1 || len(inputs[0]) == 0 {
		return nil, errors.New("takes 1 input of rank 1 or more")
	}
	return inputs[0].Clone(), nil
}

// singleInput returns the input of a layer that takes exactly one.
func singleInput(inputs []*tensor.Dense) (seqs, error) {
	if len(inputs) != 1 {
		return seqs{}, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	return readSeqs(inputs[0])
}

// readyInput is singleInput for a layer that must be validated first: with
// ready false (no successful Validate yet) it returns errNotValidated.
func readyInput(ready bool, inputs []*tensor.Dense) (seqs, error) {
	if !ready {
		return seqs{}, errNotValidated
	}
	return singleInput(inputs)
}

// readAll reads the inputs of a layer that takes one or more into buf
// (grown if short: a caller's array keeps a pass from allocating), and
// checks each against the first with fits; rule says what fits requires,
// for the error.
func readAll(buf []seqs, inputs []*tensor.Dense, rule string, fits func(first, s seqs) bool) ([]seqs, error) {
	return allSeqs(buf, inputs, readSeqs, rule, fits)
}

// allSeqs reads one or more inputs (tensors or shapes) with read and
// checks each against the first with fits.
func allSeqs[T any](buf []seqs, inputs []T, read func(T) (seqs, error), rule string, fits func(first, s seqs) bool) ([]seqs, error) {
	if len(inputs) == 0 {
		return nil, errors.New("takes 1 or more inputs, got 0")
	}
	ins := slices.Grow(buf[:0], len(inputs))[:len(inputs)]
	for i, x := range inputs {
		s, err := read(x)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		if i > 0 && !fits(ins[0], s) {
			return nil, fmt.Errorf("input %d has shape %s, want %s input 0 %s",
				i, fmtShape(s.shape(s.D)), rule, fmtShape(ins[0].shape(ins[0].D)))
		}
		ins[i] = s
	}
	return ins, nil
}

// rows is the number of token rows, B·T.
func (s seqs) rows() int { return s.B * s.T }

// expectWidth checks the input's last dimension against the layer field
// that fixes it (d_in, or d for position.learned).
func (s seqs) expectWidth(field string, want int) error {
	if s.D != want {
		return fmt.Errorf("%s mismatch: input last dim %d, layer expects %s %d", field, s.D, field, want)
	}
	return nil
}

// shape returns the shape of a tensor with the input's rank and leading
// dimensions and the given last dimension.
func (s seqs) shape(width int) []int {
	if s.batched {
		return []int{s.B, s.T, width}
	}
	return []int{s.T, width}
}

// newOutput allocates the layer output, zeroed: the input's rank and
// leading dimensions, last dimension width. It comes from run.Outputs when
// the run lends outputs (models.Session).
func (s seqs) newOutput(run *registry.Run, width int) (*tensor.Dense, []float32) {
	lender := run.Lender()
	if s.batched {
		return lender.Float32(s.B, s.T, width)
	}
	return lender.Float32(s.T, width)
}

// scratch is the working memory of one forward pass: projections, context
// vectors and head views that do not outlive the call. Scratches are
// recycled, so in the steady state a forward pass allocates only the
// tensors it returns, whatever the sequence length; concurrent passes each
// take their own.
type scratch struct {
	buf   []float32
	used  int
	heads []kernels.Head
	rows  [][]float32
	// att and masks hold an attention pass's description, which the
	// kernels' calls would otherwise move to the heap on every pass.
	att   attention
	masks []attn.Mask
}

// freeScratches holds idle scratches. It is a buffered channel rather than
// a sync.Pool on purpose: a pool is emptied by garbage collections, which
// large forward passes trigger often, and the next pass would then
// allocate its megabytes again. The price is that up to its capacity of
// scratches stay allocated, each as large as the largest pass it served
// (below maxKeptScratch).
var freeScratches = make(chan *scratch, 8)

// maxKeptScratch is the largest scratch, in floats, kept for reuse (256
// MiB); a bigger one, from an unusually long input, is left to the garbage
// collector.
const maxKeptScratch = 1 << 26

// getScratch takes an idle scratch with room for n floats.
func getScratch(n int) *scratch {
	var s *scratch
	select {
	case s = <-freeScratches:
	default:
		s = new(scratch)
	}
	if cap(s.buf) < n {
		s.buf = make([]float32, n)
	}
	s.buf, s.used = s.buf[:n], 0
	return s
}

// floats carves the next n floats off the scratch. They hold whatever the
// last pass left: callers overwrite them.
func (s *scratch) floats(n int) []float32 {
	f := s.buf[s.used : s.used+n : s.used+n]
	s.used += n
	return f
}

// headViews returns room for n kernels.Head views.
func (s *scratch) headViews(n int) []kernels.Head {
	if cap(s.heads) < n {
		s.heads = make([]kernels.Head, n)
	}
	return s.heads[:n]
}

// attention returns the scratch's attention pass, cleared.
func (s *scratch) attention() *attention {
	s.att = attention{}
	return &s.att
}

// maskList returns room for n masks.
func (s *scratch) maskList(n int) []attn.Mask {
	if cap(s.masks) < n {
		s.masks = make([]attn.Mask, n)
	}
	return s.masks[:n]
}

// sequenceViews returns room for n slices, per-sequence views of keys and
// values.
func (s *scratch) sequenceViews(n int) [][]float32 {
	if cap(s.rows) < n {
		s.rows = make([][]float32, n)
	}
	return s.rows[:n]
}

// release returns the scratch to the free list. The views are cleared so
// that they do not keep a caller's data alive.
func (s *scratch) release() {
	clear(s.heads[:cap(s.heads)])
	clear(s.rows[:cap(s.rows)])
	clear(s.masks[:cap(s.masks)])
	s.att = attention{}
	if cap(s.buf) > maxKeptScratch {
		s.buf = nil
	}
	select {
	case freeScratches <- s:
	default:
	}
}

// checkContext enforces a layer's context_length on the sequence length.
func checkContext(tokens, contextLength int) error {
	if tokens > contextLength {
		return fmt.Errorf("sequence length %d exceeds context_length %d", tokens, contextLength)
	}
	return nil
}

// volume is the number of elements of a tensor of the given shape.
func volume(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Output shapes from input shapes alone (registry.OutputShaper): `attnrun
// inspect` describes a model with them, allocating nothing. Each layer's
// OutputShape, in its file, reads the exported config fields resolved to
// their defaults as Validate resolves them, and checks what the forward
// pass checks of the shapes; mask inputs are counted, not checked: they do
// not shape the output.

// shapeSeqs is readSeqs for a shape: a (T, d) or (B, T, d) input with no
// empty dimension.
func shapeSeqs(shape tensor.Shape) (seqs, error) {
	if len(shape) != 2 && len(shape) != 3 {
		return seqs{}, fmt.Errorf("input shape %s: want (T, d) or (B, T, d)", fmtShape(shape))
	}
	for _, n := range shape {
		if n <= 0 {
			return seqs{}, fmt.Errorf("input shape %s has an empty dimension", fmtShape(shape))
		}
	}
	if len(shape) == 3 {
		return seqs{B: shape[0], T: shape[1], D: shape[2], batched: true}, nil
	}
	return seqs{B: 1, T: shape[0], D: shape[1]}, nil
}

// widthShape is the output shape of a single-input layer mapping width
// field = in to width out, with at most contextLength tokens (0: any).
func widthShape(inputs []tensor.Shape, field string, in, contextLength, out int) (tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	x, err := shapeSeqs(inputs[0])
	if err != nil {
		return nil, err
	}
	if err := x.expectWidth(field, in); err != nil {
		return nil, err
	}
	if contextLength > 0 {
		if err := checkContext(x.T, contextLength); err != nil {
			return nil, err
		}
	}
	return x.shape(out), nil
}

// sameShape is the output shape of a single-input layer that keeps the
// shape; field, unless empty, names the width it requires.
func sameShape(inputs []tensor.Shape, field string, width int) (tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	x, err := shapeSeqs(inputs[0])
	if err != nil {
		return nil, err
	}
	if field != "" {
		if err := x.expectWidth(field, width); err != nil {
			return nil, err
		}
	}
	return x.shape(x.D), nil
}

// shapeAll is readAll for shapes.
func shapeAll(inputs []tensor.Shape, rule string, fits func(first, s seqs) bool) ([]seqs, error) {
	return allSeqs(nil, inputs, shapeSeqs, rule, fits)
}

// fmtShape prints a shape as PyTorch users read it, (2, 6, 3): it is
// array.FormatShape (imported under another name: the tests have an
// array helper).
func fmtShape(shape []int) string { return attnarray.FormatShape(shape) }
