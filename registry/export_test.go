package registry_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

func TestAttrHelpers(t *testing.T) {
	for _, c := range []struct {
		got  registry.Attr
		want registry.Attr
	}{
		{registry.IntAttr("axis", -1), registry.Attr{Name: "axis", Value: int64(-1)}},
		{registry.IntsAttr("perm", 0, 2, 1), registry.Attr{Name: "perm", Value: []int64{0, 2, 1}}},
		{registry.FloatAttr("epsilon", 1e-5), registry.Attr{Name: "epsilon", Value: float32(1e-5)}},
		{registry.FloatsAttr("scales", 1, 2), registry.Attr{Name: "scales", Value: []float32{1, 2}}},
		{registry.StringAttr("mode", "constant"), registry.Attr{Name: "mode", Value: "constant"}},
	} {
		assert.Equal(t, c.want, c.got)
	}
}

// Scale multiplies its input by a learned vector: the smallest layer with a
// parameter and an ONNX export.
type Scale struct {
	w *tensor.Dense
}

func (s *Scale) Validate() error { return nil }

func (s *Scale) Params() []registry.Param {
	return []registry.Param{{Name: "weight", Value: s.w, Init: registry.ConstantInit(1)}}
}

func (s *Scale) Forward(_ *registry.Run, in []*tensor.Dense) (*tensor.Dense, error) {
	return nil, fmt.Errorf("not needed here")
}

// ExportONNX writes x * weight, summed over the last axis (keepdims),
// as ONNX's Mul and ReduceSum, whose axes moved from an attribute to an
// input at opset 13.
func (s *Scale) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	if len(inputs) != 1 {
		return "", fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	y := g.Node("Mul", []string{inputs[0], g.Param("weight")})
	if g.Opset() >= 13 {
		return g.Node("ReduceSum", []string{y, g.ConstInt64([]int64{-1})}, registry.IntAttr("keepdims", 1)), nil
	}
	return g.Node("ReduceSum", []string{y}, registry.IntsAttr("axes", -1), registry.IntAttr("keepdims", 1)), nil
}

var _ registry.Exporter = (*Scale)(nil)

// printer is a GraphBuilder that prints the nodes it is given, standing in
// for the exporter in onnxio.
type printer struct {
	layer string
	n     int
}

func (p *printer) Opset() int               { return 17 }
func (p *printer) Param(name string) string { return p.layer + "." + name }
func (p *printer) Width(string) int         { return 0 }
func (p *printer) Node(op string, inputs []string, attrs ...registry.Attr) string {
	return p.NodeOutputs(op, inputs, 1, attrs...)[0]
}
func (p *printer) NodeOutputs(op string, inputs []string, n int, attrs ...registry.Attr) []string {
	outs := make([]string, n)
	for i := range outs {
		outs[i] = fmt.Sprintf("/%s/%s_%d", p.layer, op, p.n)
		p.n++
	}
	line := fmt.Sprintf("%s = %s(%s)", strings.Join(outs, ", "), op, strings.Join(inputs, ", "))
	for _, a := range attrs {
		line += fmt.Sprintf(" %s=%v", a.Name, a.Value)
	}
	fmt.Println(line)
	return outs
}
func (p *printer) ConstInt64(v []int64, _ ...int64) string   { return fmt.Sprint(v) }
func (p *printer) ConstFloat(v []float32, _ ...int64) string { return fmt.Sprint(v) }
func (p *printer) ScalarInt64(v int64) string                { return fmt.Sprint(v) }
func (p *printer) ScalarFloat(v float32) string              { return fmt.Sprint(v) }

// A layer exports itself by adding nodes through the GraphBuilder it is
// given; parameters are initializers named by the model ("scale.weight").
func ExampleExporter() {
	layer := &Scale{w: tensor.New(tensor.WithShape(4), tensor.WithBacking([]float32{1, 2, 3, 4}))}
	out, err := layer.ExportONNX(&printer{layer: "scale"}, []string{"x"})
	fmt.Println(out, err)
	// Output:
	// /scale/Mul_0 = Mul(x, scale.weight)
	// /scale/ReduceSum_1 = ReduceSum(/scale/Mul_0, [-1]) keepdims=1
	// /scale/ReduceSum_1 <nil>
}
