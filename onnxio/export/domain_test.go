package export_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/registry"
)

// flexTwice writes softmax(2·x xᵀ/√d) x with ai.onnx.preview's
// FlexAttention, its score_mod a body that reads a value of the main graph
// (the 2); it asks for the domain only when preview is false.
func flexTwice(ask bool) func(g registry.GraphBuilder, in []string) (string, error) {
	return func(g registry.GraphBuilder, in []string) (string, error) {
		d := g.(registry.DomainBuilder)
		if ask && d.DomainVersion(export.PreviewDomain) == 0 {
			return g.Node("Identity", in), nil
		}
		x4 := g.Node("Unsqueeze", []string{in[0], g.ConstInt64([]int64{1})})
		two := g.ScalarFloat(2)
		y := d.DomainNode(export.PreviewDomain, "FlexAttention", []string{x4, x4, x4},
			registry.GraphAttr("score_mod", registry.Graph{Inputs: []int{4}, Build: func(b registry.GraphBuilder, in []string) string {
				return b.Node("Mul", []string{in[0], two})
			}}))
		return g.Node("Squeeze", []string{y, g.ConstInt64([]int64{1})}), nil
	}
}

func init() {
	for id, export := range map[string]func(registry.GraphBuilder, []string) (string, error){
		"exporttest.flex":        flexTwice(true),
		"exporttest.flex_always": flexTwice(false),
	} {
		registry.Register(registry.Info{ID: id, Summary: "test", New: func() registry.Layer {
			return &funcLayer{w: tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 1})), export: export}
		}})
	}
}

// ExportOptions.Preview lets a layer write ai.onnx.preview ops with graph
// attributes whose bodies read the main graph; the model then imports the
// domain, and the executor runs it. Without it, the layer is told so, and
// a layer that writes the op anyway fails the export.
func TestExportPreviewDomain(t *testing.T) {
	parse := func(typ string) *models.Model {
		m, err := models.Parse([]byte("name: flex\nlayers:\n  - {name: f, type: "+typ+"}\n"), "flex.yaml")
		require.NoError(t, err)
		return m
	}
	pb := exportModel(t, parse("exporttest.flex"), export.Options{Widths: map[string]int{"x": 3}})
	require.Len(t, pb.GetOpsetImport(), 1)
	require.Equal(t, "Identity", pb.GetGraph().GetNode()[0].GetOpType())

	_, err := export.Model(parse("exporttest.flex_always"), export.Options{Widths: map[string]int{"x": 3}})
	require.ErrorContains(t, err, `the export does not allow the "ai.onnx.preview" domain`)

	opts := export.Options{Widths: map[string]int{"x": 3}, Preview: true}
	pb = exportModel(t, parse("exporttest.flex"), opts)
	require.Len(t, pb.GetOpsetImport(), 2)
	require.Equal(t, export.PreviewDomain, pb.GetOpsetImport()[1].GetDomain())
	require.Equal(t, int64(1), pb.GetOpsetImport()[1].GetVersion())

	x := []float32{1, 0, -1, 0.5, 2, 0, -1, 1, 1, 0, 0, 3}
	g := exportGraph(t, parse("exporttest.flex"), opts)
	outs, err := g.Run(map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(1, 4, 3), tensor.WithBacking(x))})
	require.NoError(t, err)
	got := outs[export.OutputName].Data().([]float32)
	for i := range 4 { // softmax(2·x_i·x_j/√3) x
		var w [4]float64
		var sum float64
		for j := range 4 {
			var dot float64
			for c := range 3 {
				dot += float64(x[i*3+c] * x[j*3+c])
			}
			w[j] = math.Exp(2 * dot / math.Sqrt(3))
			sum += w[j]
		}
		for c := range 3 {
			var want float64
			for j := range 4 {
				want += w[j] / sum * float64(x[j*3+c])
			}
			require.InDelta(t, want, got[i*3+c], 1e-6+1e-5*math.Abs(want), "y[%d][%d]", i, c)
		}
	}
}
