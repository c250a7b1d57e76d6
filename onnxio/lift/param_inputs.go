package lift

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Weights given as graph inputs. ONNX Runtime's Attention tests (and some
// exporters) declare a projection's weight and bias as graph inputs with
// no initializer: the caller feeds them on every run. The lifter reads a
// graph input as such a weight when the graph reads it only where a weight
// goes (the B or C operand of a Gemm, the second operand of a MatMul) and
// declares its shape in fixed sizes. It lifts a copy of the graph in which
// those inputs are initializers of random values, so that the layers are
// recognized as usual; the lifted model then loads them into its
// parameters from the inputs on every run (ParamInput, BindParamInputs),
// so that the lifted file keeps the graph's interface.

// MetadataParamInputs is the metadata key of an attnrun file listing the
// graph inputs that hold parameters (YAML, a list of ParamInput).
const MetadataParamInputs = "attnrun.param_inputs"

// ParamInput is a block of a lifted model's parameter that a graph input
// holds: rows Lo:Hi of the input (of its transpose when Transposed) are
// rows At:At+Hi-Lo of the parameter.
type ParamInput struct {
	// Input is the graph input's name.
	Input string `yaml:"input"`
	// Param is the model parameter, "<layer>.<name>".
	Param      string `yaml:"param"`
	Transposed bool   `yaml:"transposed,omitempty"`
	Lo         int    `yaml:"lo"`
	Hi         int    `yaml:"hi"`
	At         int    `yaml:"at"`
	// View, when set, is the (rows, cols) the input of another rank is
	// read as (Keras's (d, heads, head_dim) weights).
	View []int `yaml:"view,omitempty,flow"`
	// Fill says the input, a vector of symbolic size (ONNX Runtime's
	// weight_scale [C]: one per tensor or one per column), may hold a
	// single value, which then fills rows At:At+Hi-Lo.
	Fill bool `yaml:"fill,omitempty"`
}

// weightInputs lists the graph inputs of m that hold weights: no
// initializer backs them, their shape is fixed, and every node that reads
// them takes them as a Gemm's B or C or a MatMul's second operand, the
// first being computed from the other graph inputs (tokens). It returns
// too the shapes of the integer ones, which their readers give
// (integerWeightInputs).
func weightInputs(m *onnxpb.ModelProto) ([]string, map[string][]int) {
	g := m.GetGraph()
	inits := map[string]bool{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	integer := integerWeightInputs(m) // param_inputs_integer.go
	var out []string
	for _, vi := range g.GetInput() {
		name := vi.GetName()
		if _, ok := integer[name]; ok {
			out = append(out, name)
			continue
		}
		if inits[name] || !fixedShape(vi) {
			continue
		}
		dt := onnxio.ElemType(vi)
		if dt != onnxio.Float && dt != onnxio.Float16 {
			continue
		}
		read, weightOnly := false, true
		var tokens map[string]bool // what the other inputs compute
		for _, n := range g.GetNode() {
			for i, in := range n.GetInput() {
				if in != name {
					continue
				}
				read = true
				op := n.GetOpType()
				if !(op == "Gemm" && i >= 1 || op == "MatMul" && i == 1) || n.GetInput()[0] == name {
					weightOnly = false
					continue
				}
				if tokens == nil {
					tokens = reachedFrom(g, name, inits)
				}
				weightOnly = weightOnly && tokens[n.GetInput()[0]]
			}
		}
		if read && weightOnly {
			out = append(out, name)
		}
	}
	return out, integer
}

// reachedFrom marks the values computed from the contents of the graph
// inputs other than except (nodes may be out of order: it iterates until
// nothing changes).
func reachedFrom(g *onnxpb.GraphProto, except string, inits map[string]bool) map[string]bool {
	reached := map[string]bool{}
	for _, vi := range g.GetInput() {
		if vi.GetName() != except && !inits[vi.GetName()] {
			reached[vi.GetName()] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for _, n := range g.GetNode() {
			if n.GetOpType() == "Shape" || n.GetOpType() == "Size" || len(n.GetOutput()) == 0 || reached[n.GetOutput()[0]] {
				continue
			}
			if slices.ContainsFunc(n.GetInput(), func(in string) bool { return reached[in] }) {
				for _, o := range n.GetOutput() {
					reached[o] = true
				}
				changed = true
			}
		}
	}
	return reached
}

// fixedShape reports whether an input declares every dimension's size.
func fixedShape(vi *onnxpb.ValueInfoProto) bool {
	dims := onnxio.Dims(vi)
	if !onnxio.HasShape(vi) || len(dims) == 0 {
		return false
	}
	for _, d := range dims {
		if !d.Known || d.Value < 1 {
			return false
		}
	}
	return true
}

// declaredDims is vi's declared shape as numbers, 0 for a symbolic
// dimension.
func declaredDims(vi *onnxpb.ValueInfoProto) []int {
	dims := onnxio.Dims(vi)
	shape := make([]int, len(dims))
	for i, d := range dims {
		shape[i] = int(d.Value)
	}
	return shape
}

// maxWeightInputElements bounds the random values materializeWeights
// draws for one input, which a stranger's file declares.
const maxWeightInputElements = 1 << 26

// materializeWeights returns a copy of m in which the named graph inputs
// are initializers of seeded random values, of their declared type and
// shape, or of the shape integer gives (weightInputs).
func materializeWeights(m *onnxpb.ModelProto, names []string, integer map[string][]int) (*onnxpb.ModelProto, error) {
	c := proto.Clone(m).(*onnxpb.ModelProto)
	g := c.GetGraph()
	rng := rand.New(rand.NewPCG(0x3e1, uint64(len(names))))
	var kept []*onnxpb.ValueInfoProto
	for _, vi := range g.GetInput() {
		if !slices.Contains(names, vi.GetName()) {
			kept = append(kept, vi)
			continue
		}
		shape, ok := integer[vi.GetName()]
		if !ok {
			shape = declaredDims(vi)
		}
		n := 1
		for _, d := range shape {
			if n *= d; n > maxWeightInputElements {
				return nil, fmt.Errorf("input %q of shape %s is too large to read as a weight (limit %d elements)", vi.GetName(), onnxio.FormatDims(onnxio.Dims(vi)), maxWeightInputElements)
			}
		}
		if dt := onnxio.ElemType(vi); dt == onnxio.Int8 || dt == onnxio.Uint8 {
			t, err := onnxio.ArrayToTensor(vi.GetName(), randomIntegers(rng, shape, dt))
			if err != nil {
				return nil, err
			}
			g.Initializer = append(g.Initializer, t)
			continue
		}
		// Values of a trained layer's size (std 1/√fan_in), so that a
		// float16 graph computes what its float32 lift does within float16's
		// precision.
		std := 0.02
		if len(shape) > 1 {
			std = 1 / math.Sqrt(float64(shape[0]))
		}
		values := make([]float32, n)
		for i := range values {
			values[i] = float32(rng.NormFloat64() * std)
		}
		a := array.FromSlice(shape, values)
		if onnxio.ElemType(vi) == onnxio.Float16 {
			for i, v := range values {
				values[i] = array.RoundFloat(array.Float16, float64(v), false)
			}
			a.DType = array.Float16
		}
		t, err := onnxio.ArrayToTensor(vi.GetName(), a)
		if err != nil {
			return nil, err
		}
		g.Initializer = append(g.Initializer, t)
	}
	g.Input = kept
	return c, nil
}

// randomIntegers draws int8 or uint8 values over the type's whole range:
// a quantized weight or zero point.
func randomIntegers(rng *rand.Rand, shape []int, dt onnxio.DataType) *array.Array {
	n := product(shape)
	if dt == onnxio.Uint8 {
		values := make([]uint8, n)
		for i := range values {
			values[i] = uint8(rng.IntN(256))
		}
		return array.FromSlice(shape, values)
	}
	values := make([]int8, n)
	for i := range values {
		values[i] = int8(rng.IntN(256) - 128)
	}
	return array.FromSlice(shape, values)
}

// paramInputs lists where the weight inputs went in the lifted layers'
// parameters, in layer and parameter order.
func (b *builder) paramInputs() []ParamInput {
	if len(b.a.weightInputs) == 0 {
		return nil
	}
	var out []ParamInput
	for _, l := range b.layers {
		for _, p := range l.params {
			at := 0
			for _, pc := range p.pieces {
				o := b.a.origin(pc, p.value.Dims())
				if slices.Contains(b.a.weightInputs, o.init) {
					out = append(out, ParamInput{Input: o.init, Param: l.name + "." + p.name, Transposed: o.transposed, Lo: o.lo, Hi: o.hi, At: at, View: o.view,
						Fill: slices.Contains(b.a.fillInputs, o.init)})
				}
				at += o.hi - o.lo
			}
		}
	}
	return out
}

// weightInputsNote says which graph inputs the lift read as weights.
func weightInputsNote(names []string) string {
	return fmt.Sprintf("graph input(s) %s hold weights (the graph reads them as a Gemm's or MatMul's weight, or as the parameters of a MatMulInteger and its scales): they are parameters of the lifted model, loaded from those inputs on every run", quoted(names))
}

// BindParamInputs loads the graph inputs that hold parameters into the
// model's parameters, as the lifted file's ParamInputs (ReadParamInputs)
// say. It writes the model's parameters: passes of the model must not run
// meanwhile, nor at once with other inputs.
func BindParamInputs(m *models.Model, binds []ParamInput, inputs map[string]*tensor.Dense) error {
	params := map[string]*tensor.Dense{}
	for _, p := range m.Params() {
		params[p.Name] = p.Value
	}
	for _, bd := range binds {
		dst, ok := params[bd.Param]
		if !ok {
			return fmt.Errorf("input %q: the model has no parameter %q", bd.Input, bd.Param)
		}
		src, ok := inputs[bd.Input]
		if !ok || src == nil {
			return fmt.Errorf("input %q (parameter %q) is not given", bd.Input, bd.Param)
		}
		if err := copyRows(dst, src, bd); err != nil {
			return fmt.Errorf("input %q into parameter %q: %w", bd.Input, bd.Param, err)
		}
	}
	if len(binds) > 0 {
		m.ParamsChanged()
	}
	return nil
}

// copyRows copies rows Lo:Hi of src (of its transpose) into rows At: of dst.
func copyRows(dst, src *tensor.Dense, bd ParamInput) error {
	values, err := match.Floats(src)
	if err != nil {
		return err
	}
	shape := []int(src.Shape())
	if bd.Fill && len(values) == 1 && dst.Dims() == 1 {
		values, shape = slices.Repeat(values, bd.Hi-bd.Lo), []int{bd.Hi - bd.Lo}
		bd.Lo, bd.Hi = 0, len(values)
	}
	if bd.View != nil {
		if product(bd.View) != len(values) {
			return fmt.Errorf("shape %v cannot be read as %v", src.Shape(), bd.View)
		}
		shape = bd.View
	}
	rows, cols := 1, 1
	switch len(shape) {
	case 1:
		rows = shape[0]
	case 2:
		rows, cols = shape[0], shape[1]
	default:
		return fmt.Errorf("shape %v: want a vector or a matrix", shape)
	}
	if bd.Transposed {
		if len(shape) != 2 {
			return fmt.Errorf("shape %v cannot be transposed", src.Shape())
		}
		rows, cols = cols, rows
	}
	width := 1
	if dst.Dims() == 2 {
		width = dst.Shape()[1]
	}
	data := dst.Data().([]float32)
	n := bd.Hi - bd.Lo
	if width != cols || bd.Lo < 0 || bd.Hi > rows || n < 0 || (bd.At+n)*width > len(data) {
		return fmt.Errorf("rows %d:%d of a (%d, %d) tensor do not fit rows %d: of a parameter of shape %v", bd.Lo, bd.Hi, rows, cols, bd.At, dst.Shape())
	}
	for r := range n {
		for c := range cols {
			k := (bd.Lo+r)*cols + c
			if bd.Transposed {
				k = c*rows + bd.Lo + r
			}
			data[(bd.At+r)*width+c] = float32(values[k])
		}
	}
	return nil
}

// SetParamInputs records in a model's metadata which graph inputs hold
// parameters; ReadParamInputs reads them back.
func SetParamInputs(m *onnxpb.ModelProto, binds []ParamInput) error {
	if len(binds) == 0 {
		return nil
	}
	data, err := yaml.Marshal(binds)
	if err != nil {
		return err
	}
	onnxio.SetMetadata(m, MetadataParamInputs, string(data))
	return nil
}

// ReadParamInputs reads which graph inputs of an attnrun file hold
// parameters (MetadataParamInputs); none when the file says nothing.
func ReadParamInputs(m *onnxpb.ModelProto) ([]ParamInput, error) {
	text, ok := onnxio.Metadata(m, MetadataParamInputs)
	if !ok {
		return nil, nil
	}
	var binds []ParamInput
	dec := yaml.NewDecoder(strings.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(&binds); err != nil {
		return nil, fmt.Errorf("metadata %s: %w", MetadataParamInputs, err)
	}
	declared := map[string]bool{}
	for _, vi := range m.GetGraph().GetInput() {
		declared[vi.GetName()] = true
	}
	for _, bd := range binds {
		if !declared[bd.Input] {
			return nil, fmt.Errorf("metadata %s: %q is not a graph input", MetadataParamInputs, bd.Input)
		}
	}
	return binds, nil
}
