package layers

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/registry"
)

// LinearInteger is nn.linear_integer, a linear layer on quantized tokens
// as ONNX Runtime's quantizer writes it: MatMulInteger of the tokens and
// the weight, each less its zero point, summed in int32; the sum cast to
// float32 and multiplied by input_scale·weight_scale (that product first,
// in float32, as the graph computes it); then the bias added. Its input
// holds the quantized tokens, integers of input_type (attnrun models take
// float32 or int64 tensors, which hold every uint8 and int8 exactly); it
// does not quantize float tokens itself.
//
// The parameters are the quantizer's, stored as float32 holding integers
// where ONNX holds integers: weight (d_out, d_in) as nn.Linear stores it,
// bias (d_out), input_scale and input_zero_point (1), and weight_scale and
// weight_zero_point, one per output column with per_channel, else (1). A
// fresh layer has a zero weight and unit scales: its parameters come from
// a quantized graph (attnrun import), not from training.
type LinearInteger struct {
	// DIn is the width of the input tokens.
	DIn int `yaml:"d_in"`
	// DOut is the width of the output tokens.
	DOut int `yaml:"d_out"`
	// Bias adds a float32 bias after the scales (default true).
	Bias bool `yaml:"bias"`
	// PerChannel gives every output column its own weight scale and zero
	// point; otherwise one of each serves the whole weight.
	PerChannel bool `yaml:"per_channel"`
	// InputType is the integer type of the tokens and input_zero_point:
	// uint8 (default) or int8.
	InputType string `yaml:"input_type"`
	// WeightType is the integer type of weight and weight_zero_point: int8
	// (default) or uint8.
	WeightType string `yaml:"weight_type"`

	p *integerParams
}

var (
	_ registry.Provisioner   = (*LinearInteger)(nil)
	_ registry.OutputShaper  = (*LinearInteger)(nil)
	_ registry.FLOPCounter   = (*LinearInteger)(nil)
	_ registry.TokenWise     = (*LinearInteger)(nil)
	_ registry.ParamsWatcher = (*LinearInteger)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "nn.linear_integer",
		Summary: "quantized linear layer, ONNX's MatMulInteger: (x − x_zp)(W − w_zp) in int32, times x_scale·w_scale, plus bias",
		New:     func() registry.Layer { return &LinearInteger{Bias: true, InputType: "uint8", WeightType: "int8"} },
	})
}

// intRange is the values of an integer type, and its ONNX element type.
type intRange struct {
	name   string
	lo, hi int32
	onnx   int64
}

func (r intRange) String() string { return r.name }

// intRanges are the integer types MatMulInteger takes.
var intRanges = map[string]intRange{
	"uint8": {"uint8", 0, math.MaxUint8, 2},
	"int8":  {"int8", math.MinInt8, math.MaxInt8, 3},
}

// integerParams are the parameters and what a pass derives from them.
type integerParams struct {
	weight, bias            *tensor.Dense
	inputScale, inputZero   *tensor.Dense
	weightScale, weightZero *tensor.Dense
	in, out                 int
	inputRange, weightRange intRange
	// mem is the budget ints is reserved from.
	mem  registry.Memory
	mu   sync.Mutex
	ints *integerWeights // nil until a pass reads the parameters
}

// integerWeights are the parameters as the product uses them: the
// weight less its zero point, (d_out, d_in), and the combined scale of
// each output column, input_scale·weight_scale in float32.
type integerWeights struct {
	w         []int32
	inputZero int32
	scale     []float32
}

// Validate checks the config and allocates the parameters.
func (l *LinearInteger) Validate() error { return l.Provision(nil) }

// PlanParams lists the parameters without allocating them.
func (l *LinearInteger) PlanParams() ([]registry.ParamShape, error) { return planParams(l.prepare) }

// Provision checks the config and allocates the parameters from mem,
// which the integer copy of the parameters a pass makes is reserved from
// too.
func (l *LinearInteger) Provision(mem registry.Memory) (err error) {
	if l.p, err = provision(mem, l.prepare); err != nil {
		return err
	}
	if mem == nil {
		mem = budget.New(budget.DefaultLimit)
	}
	l.p.mem = mem
	return nil
}

func (l *LinearInteger) prepare(a paramAlloc) (*integerParams, error) {
	if err := firstError(positive("d_in", l.DIn), positive("d_out", l.DOut)); err != nil {
		return nil, err
	}
	inputRange, ok := intRanges[l.InputType]
	if !ok {
		return nil, fmt.Errorf("input_type %q: want uint8 or int8", l.InputType)
	}
	weightRange, ok := intRanges[l.WeightType]
	if !ok {
		return nil, fmt.Errorf("weight_type %q: want int8 or uint8", l.WeightType)
	}
	columns := 1
	if l.PerChannel {
		columns = l.DOut
	}
	p := &integerParams{in: l.DIn, out: l.DOut, inputRange: inputRange, weightRange: weightRange}
	var err error
	if p.weight, err = a.zeros("weight", l.DOut, l.DIn); err != nil {
		return nil, err
	}
	if l.Bias {
		if p.bias, err = a.zeros("bias", l.DOut); err != nil {
			return nil, err
		}
	}
	if p.inputScale, err = a.zeros("input_scale", 1); err != nil {
		return nil, err
	}
	if p.inputZero, err = a.zeros("input_zero_point", 1); err != nil {
		return nil, err
	}
	if p.weightScale, err = a.zeros("weight_scale", columns); err != nil {
		return nil, err
	}
	if p.weightZero, err = a.zeros("weight_zero_point", columns); err != nil {
		return nil, err
	}
	if !a.planning() {
		fillParam(p.inputScale, 1)
		fillParam(p.weightScale, 1)
	}
	return p, nil
}

// fillParam sets every value of a parameter.
func fillParam(t *tensor.Dense, v float32) {
	data := t.Float32s()
	for i := range data {
		data[i] = v
	}
}

// Params lists weight, bias, input_scale, input_zero_point, weight_scale
// and weight_zero_point.
func (l *LinearInteger) Params() []registry.Param {
	p := l.p
	if p == nil {
		return nil
	}
	zero, one := registry.ConstantInit(0), registry.ConstantInit(1)
	ps := []registry.Param{{Name: "weight", Value: p.weight, Init: zero}}
	if p.bias != nil {
		ps = append(ps, registry.Param{Name: "bias", Value: p.bias, Init: zero})
	}
	return append(ps,
		registry.Param{Name: "input_scale", Value: p.inputScale, Init: one},
		registry.Param{Name: "input_zero_point", Value: p.inputZero, Init: zero},
		registry.Param{Name: "weight_scale", Value: p.weightScale, Init: one},
		registry.Param{Name: "weight_zero_point", Value: p.weightZero, Init: zero})
}

// ParamsChanged drops the integer copy of the parameters, which the next
// pass reads again.
func (l *LinearInteger) ParamsChanged() {
	if l.p == nil {
		return
	}
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	if l.p.ints != nil {
		l.p.mem.Release(l.p.intBytes())
		l.p.ints = nil
	}
}

// intBytes is what the integer copy of the parameters holds.
func (p *integerParams) intBytes() int64 {
	return budget.Bytes(int64(p.in)*int64(p.out)+int64(p.out), 4)
}

// Forward maps quantized tokens (T, d_in) or (B, T, d_in) to float32
// (T, d_out) or (B, T, d_out).
func (l *LinearInteger) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if l.p == nil {
		return nil, errNotValidated
	}
	in, err := integerInput(inputs)
	if err != nil {
		return nil, err
	}
	if err := in.expectWidth("d_in", l.p.in); err != nil {
		return nil, err
	}
	iw, err := l.p.integers()
	if err != nil {
		return nil, err
	}
	x, err := in.integers("input", l.p.inputRange, iw.inputZero)
	if err != nil {
		return nil, err
	}
	out, y := in.newOutput(run, l.p.out)
	var bias []float32
	if l.p.bias != nil {
		bias = l.p.bias.Float32s()
	}
	iw.apply(y, x, in.rows(), l.p.in, bias)
	return out, nil
}

// apply computes y = float32(Σ x·w) · scale (+ bias) for rows tokens x of
// width in, x already less its zero point. The int32 sums wrap around as
// MatMulInteger's do.
func (iw *integerWeights) apply(y []float32, x []int32, rows, in int, bias []float32) {
	out := len(iw.scale)
	for r := range rows {
		xr := x[r*in : (r+1)*in]
		yr := y[r*out : (r+1)*out]
		for j := range out {
			wj := iw.w[j*in : (j+1)*in]
			var acc int32
			for k, v := range xr {
				acc += v * wj[k]
			}
			// The explicit conversions keep each product rounded to
			// float32 on its own, as the graph's Mul then Add: Go may
			// otherwise fuse them into one multiply-add.
			v := float32(float32(acc) * iw.scale[j])
			if bias != nil {
				v += bias[j]
			}
			yr[j] = v
		}
	}
}

// integers returns the parameters as the product uses them, reading and
// checking them on the first pass after a change.
func (p *integerParams) integers() (*integerWeights, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ints != nil {
		return p.ints, nil
	}
	if err := p.mem.Reserve(p.intBytes(), "the integer weight"); err != nil {
		return nil, err
	}
	kept := false
	defer func() {
		if !kept {
			p.mem.Release(p.intBytes())
		}
	}()
	iw := &integerWeights{w: make([]int32, p.in*p.out), scale: make([]float32, p.out)}
	inputZero, err := integerValues("input_zero_point", p.inputZero.Float32s(), p.inputRange)
	if err != nil {
		return nil, err
	}
	iw.inputZero = inputZero[0]
	weightZero, err := integerValues("weight_zero_point", p.weightZero.Float32s(), p.weightRange)
	if err != nil {
		return nil, err
	}
	w, err := integerValues("weight", p.weight.Float32s(), p.weightRange)
	if err != nil {
		return nil, err
	}
	inputScale, weightScale := p.inputScale.Float32s()[0], p.weightScale.Float32s()
	for j := range p.out {
		c := j % len(weightScale) // one scale and zero point for all columns, or one each
		iw.scale[j] = inputScale * weightScale[c]
		for k := range p.in {
			iw.w[j*p.in+k] = w[j*p.in+k] - weightZero[c]
		}
	}
	p.ints, kept = iw, true
	return iw, nil
}

// intValueError reports a value that is not an integer of its type.
type intValueError struct {
	what  string
	index int
	value float32
	typ   intRange
}

func (e *intValueError) Error() string {
	return fmt.Sprintf("%s[%d] = %g: want an integer of %s (%d to %d)", e.what, e.index, e.value, e.typ, e.typ.lo, e.typ.hi)
}

// integerValues reads float32 values holding integers of type r.
func integerValues(what string, values []float32, r intRange) ([]int32, error) {
	out := make([]int32, len(values))
	for i, v := range values {
		if v != float32(math.Trunc(float64(v))) || v < float32(r.lo) || v > float32(r.hi) {
			return nil, &intValueError{what: what, index: i, value: v, typ: r}
		}
		out[i] = int32(v)
	}
	return out, nil
}

// integerInput reads the one input of the layer: float32 or int64 values,
// with its shape as seqs (data unset).
func integerInput(inputs []*tensor.Dense) (seqs, error) {
	if len(inputs) != 1 {
		return seqs{}, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	x := inputs[0]
	if x == nil {
		return seqs{}, errors.New("input is nil: want a (T, d) or (B, T, d) tensor of quantized values")
	}
	s, err := shapeSeqs(x.Shape())
	if err != nil {
		return s, err
	}
	if x.Dtype() != tensor.Float32 && x.Dtype() != tensor.Int64 {
		return seqs{}, fmt.Errorf("input dtype %v: want float32 or int64 holding the quantized integers", x.Dtype())
	}
	if s.dense, err = rowMajor("input", x); err != nil {
		return seqs{}, err
	}
	return s, nil
}

// integers reads the tokens as integers of type r less the zero point.
func (s seqs) integers(what string, r intRange, zero int32) ([]int32, error) {
	n := volume(s.dense.Shape())
	var out []int32
	switch data := s.dense.Data().(type) {
	case []float32:
		var err error
		if out, err = integerValues(what, data[:n], r); err != nil {
			return nil, err
		}
	case []int64:
		out = make([]int32, n)
		for i, v := range data[:n] {
			if v < int64(r.lo) || v > int64(r.hi) {
				return nil, &intValueError{what: what, index: i, value: float32(v), typ: r}
			}
			out[i] = int32(v)
		}
	}
	for i := range out {
		out[i] -= zero
	}
	return out, nil
}

// OutputShape is the input's shape with width d_out.
func (l *LinearInteger) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return widthShape(inputs, "d_in", l.DIn, 0, l.DOut)
}

// FLOPs counts the integer product, 2·B·T·d_in·d_out; the scales and the
// bias are elementwise.
func (l *LinearInteger) FLOPs(inputs []tensor.Shape) (int64, error) {
	return linearFLOPs(inputs, l.DIn, l.DOut)
}

// TokenWise marks the layer as token-wise for incremental decoding.
func (l *LinearInteger) TokenWise() {}
