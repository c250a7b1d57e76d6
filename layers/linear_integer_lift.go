package layers

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// nn.linear_integer in ONNX graphs, as ONNX Runtime's quantizer writes a
// Linear (or Gemm) over quantized tokens:
//
//	y = Cast<float>(MatMulInteger(x, W, x_zp, w_zp)) · Mul(x_scale, w_scale) [+ b]
//
// with W (d_in, d_out) static, its zero point and scale one per tensor or
// one per output column, and x_scale and x_zp one each. The zero points
// may be omitted (0). Its input is x, the quantized tokens.

func init() {
	match.RegisterPattern(match.Pattern{Name: "nn.linear_integer", Op: "MatMulInteger", Match: liftLinearInteger})
}

// integerTypes names the tensor types MatMulInteger takes.
var integerTypes = map[tensor.Dtype]string{tensor.Uint8: "uint8", tensor.Int8: "int8"}

// liftLinearInteger lifts the quantized linear layer whose MatMulInteger
// is n.
func liftLinearInteger(g match.Graph, n *match.Node) (*match.Layer, error) {
	ins := append(n.Inputs(), "", "")[:4]
	x, w, xZero, wZero := ins[0], ins[1], ins[2], ins[3]
	if !g.IsData(x) || g.IsData(w) || g.IsData(xZero) || g.IsData(wZero) {
		return nil, nil
	}
	cast := onlyReader(g, n.Output())
	if cast == nil || cast.Op() != "Cast" || cast.Int("to", 0) != 1 {
		return nil, match.Refuse([]*match.Node{n}, "MatMulInteger %s is not cast to float (nn.linear_integer dequantizes its int32 sums)", n.Name())
	}
	mul := onlyReader(g, cast.Output())
	if mul == nil || mul.Op() != "Mul" || g.IsData(otherInput(mul, cast.Output())) {
		return nil, match.Refuse([]*match.Node{n, cast}, "the sums of MatMulInteger %s are not multiplied by static scales", n.Name())
	}
	xScale, wScale := scalesOf(g, otherInput(mul, cast.Output()))
	out, bias := mul.Output(), ""
	if add := onlyReader(g, out); add != nil && add.Op() == "Add" && !g.IsData(otherInput(add, out)) {
		out, bias = add.Output(), otherInput(add, out)
	}
	refuse := func(format string, args ...any) error {
		return match.Refuse([]*match.Node{n, cast, mul}, "nn.linear_integer at %s: %s", n.Name(), fmt.Sprintf(format, args...))
	}
	xShape, err := g.Shape(x)
	if err != nil {
		return nil, err
	}
	probe, err := g.ValueAt(0, x)
	if err != nil {
		return nil, err
	}
	inputType, ok := integerTypes[probe.Dtype()]
	if !ok || len(xShape) < 2 || len(xShape) > 3 {
		return nil, refuse("the tokens are %v %v, want uint8 or int8 (T, d_in) or (B, T, d_in)", probe.Dtype(), xShape)
	}
	weight, err := g.Constant(w)
	if err != nil {
		return nil, err
	}
	weightType, ok := integerTypes[weight.Dtype()]
	if !ok || weight.Dims() != 2 || weight.Shape()[0] != xShape[len(xShape)-1] {
		return nil, refuse("the weight is %v %v, want uint8 or int8 (%d, d_out)", weight.Dtype(), weight.Shape(), xShape[len(xShape)-1])
	}
	dIn, dOut := weight.Shape()[0], weight.Shape()[1]
	p := integerLift{g: g, dOut: dOut}
	wt, err := transposedFloat32(weight)
	if err != nil {
		return nil, err
	}
	p.params = []match.Param{{Name: "weight", Value: wt, From: w, Transposed: true}}
	if bias != "" {
		if err := p.vector("bias", bias, dOut, dOut); err != nil {
			return nil, refuse("%v", err)
		}
	}
	if err := firstError(p.vector("input_scale", xScale, 1, 1), p.vector("input_zero_point", xZero, 1, 1)); err != nil {
		return nil, refuse("%v", err)
	}
	columns := 1
	if sizeOf(g, wScale) == dOut || sizeOf(g, wZero) == dOut {
		columns = dOut
	}
	if err := firstError(p.vector("weight_scale", wScale, columns, dOut), p.vector("weight_zero_point", wZero, columns, dOut)); err != nil {
		return nil, refuse("%v", err)
	}
	return &match.Layer{Type: "nn.linear_integer", Name: "linear", Inputs: []string{x}, Output: out,
		Config: []match.Field{{Key: "d_in", Value: dIn}, {Key: "d_out", Value: dOut}, {Key: "bias", Value: bias != ""},
			{Key: "per_channel", Value: columns > 1}, {Key: "input_type", Value: inputType}, {Key: "weight_type", Value: weightType}},
		Params: p.params}, nil
}

// scalesOf reads the static factor the sums are multiplied by as
// input_scale and weight_scale: the two operands of the Mul that computes
// it, the input scale the one of a single value (the first when both
// are; their float32 product is the same either way), or the factor
// itself as the weight scale and no input scale ("": 1).
func scalesOf(g match.Graph, s string) (xScale, wScale string) {
	if m := g.Producer(s); m != nil && m.Op() == "Mul" {
		a, b := m.Inputs()[0], m.Inputs()[1]
		if sizeOf(g, a) != 1 && sizeOf(g, b) == 1 {
			a, b = b, a
		}
		if sizeOf(g, a) == 1 {
			return a, b
		}
	}
	return "", s
}

// sizeOf is the number of elements of a static value, 0 when there is
// none or it is not static.
func sizeOf(g match.Graph, v string) int {
	if v == "" {
		return 0
	}
	t, err := g.Constant(v)
	if err != nil {
		return 0
	}
	return t.Shape().TotalSize()
}

// integerLift collects the parameters of a quantized linear layer.
type integerLift struct {
	g      match.Graph
	dOut   int
	params []match.Param
}

// vector adds parameter name read from static value v, of size elements
// (1 or the layer's d_out columns; a missing v is a default of 0, or 1 for
// a scale). broadcast is the size the graph broadcasts v to, which v
// must have or have one element of.
func (p *integerLift) vector(name, v string, size, broadcast int) error {
	values := make([]float32, size)
	if v == "" {
		if name == "input_scale" || name == "weight_scale" {
			fillParam(float32Vector(values), 1)
		}
		p.params = append(p.params, match.Param{Name: name, Value: float32Vector(values)})
		return nil
	}
	t, err := p.g.Constant(v)
	if err != nil {
		return err
	}
	f, err := match.Floats(t)
	if err != nil {
		return fmt.Errorf("%s %q: %w", name, v, err)
	}
	if t.Dims() > 1 || len(f) != size {
		return fmt.Errorf("%s %q has shape %v, want (%d) (the graph broadcasts it to %d columns)", name, v, t.Shape(), size, broadcast)
	}
	for i, x := range f {
		values[i] = float32(x)
	}
	p.params = append(p.params, match.Param{Name: name, Value: float32Vector(values), From: v})
	return nil
}

// float32Vector wraps float32 values as a vector.
func float32Vector(values []float32) *tensor.Dense {
	return tensor.New(tensor.WithShape(len(values)), tensor.WithBacking(values))
}

// transposedFloat32 converts a static (r, c) matrix of any number type to
// a float32 (c, r) one.
func transposedFloat32(t *tensor.Dense) (*tensor.Dense, error) {
	f, err := match.Floats(t)
	if err != nil {
		return nil, err
	}
	r, c := t.Shape()[0], t.Shape()[1]
	out := make([]float32, r*c)
	for i := range r {
		for j := range c {
			out[j*r+i] = float32(f[i*c+j])
		}
	}
	return tensor.New(tensor.WithShape(c, r), tensor.WithBacking(out)), nil
}
