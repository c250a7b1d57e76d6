package export_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	_ "github.com/attnrun/attnrun/layers"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// Every preset, exported at the oldest and newest opset, with its input
// width given (as the CLI gives it) and inferred, runs on the executor and
// gives what attnrun's Forward gives: on the preset's own input (a (T, d)
// one fed as (1, T, d)), and on a batch of two shorter random sequences.
func TestExportPresetsMatchForward(t *testing.T) {
	for _, p := range presets(t) {
		for _, opset := range []int{13, 17} {
			for _, given := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/opset%d/width_given=%v", p.Name, opset, given), func(t *testing.T) {
					m, x := presetModel(t, p.Name)
					opts := export.Options{Opset: opset}
					if given {
						opts.Widths = map[string]int{"x": lastDim(x)}
					}
					g := exportGraph(t, m, opts)

					want := forward(t, m, x)
					got := runGraph(t, g, batched(x))
					assertClose(t, want.Data().([]float32), got)

					short := randomInput(2, max(seqLen(x)-1, 1), lastDim(x), 7)
					assertClose(t, forward(t, m, short).Data().([]float32), runGraph(t, g, short))
				})
			}
		}
	}
}

// A (B, T, d) input gives the same numbers through Forward and the export
// for every batch element: the batch axis really is dynamic.
func TestExportBatchOfThree(t *testing.T) {
	m, _ := presetModel(t, "seed-bishop-multihead")
	g := exportGraph(t, m, export.Options{})
	x := randomInput(3, 5, 6, 11)
	assertClose(t, forward(t, m, x).Data().([]float32), runGraph(t, g, x))
}

func TestExportIsDeterministic(t *testing.T) {
	for _, name := range []string{"seed-mha-wrapper", "seed-bishop-multihead-concat", "seed-bishop-multihead"} {
		m, _ := presetModel(t, name)
		a := encode(t, exportModel(t, m, export.Options{}))
		m2, _ := presetModel(t, name)
		b := encode(t, exportModel(t, m2, export.Options{}))
		assert.Equal(t, a, b, "%s: two exports differ", name)
	}
}

func TestExportMetadataAndHeader(t *testing.T) {
	m, _ := presetModel(t, "seed-mha-wrapper")
	pb := exportModel(t, m, export.Options{Opset: 15})
	config, ok := onnxio.Metadata(pb, "attnrun.config")
	require.True(t, ok, "attnrun.config missing")
	assert.Equal(t, string(m.Config().YAML), config)
	version, ok := onnxio.Metadata(pb, "attnrun.version")
	require.True(t, ok, "attnrun.version missing")
	assert.Equal(t, "1", version)
	assert.Equal(t, "attnrun", pb.GetProducerName())
	assert.Equal(t, int64(8), pb.GetIrVersion())
	assert.Equal(t, int64(15), onnxio.OpsetVersion(pb, ""))
	assert.Equal(t, "seed-mha-wrapper", pb.GetGraph().GetName())

	// The YAML in the metadata rebuilds the same model.
	again, err := models.Parse([]byte(config), "metadata")
	require.NoError(t, err)
	assert.Equal(t, paramNames(m), paramNames(again))
}

func TestExportDeclaresSymbolicAxes(t *testing.T) {
	for _, c := range []struct {
		preset  string
		in, out string
	}{
		{"seed-mha-wrapper", "[batch seq 3]", "[batch seq 4]"},
		{"seed-bishop-multihead-concat", "[batch seq 3]", "[batch seq 3]"},
		{"seed-head-1337", "[batch seq 32]", "[batch seq 16]"},
		// Without parameters any width fits: it stays symbolic.
		{"seed-simple", "[batch seq d]", "[batch seq ?]"},
		{"seed-bag-of-words", "[batch seq d]", "[batch seq ?]"},
	} {
		m, _ := presetModel(t, c.preset)
		g := exportModel(t, m, export.Options{}).GetGraph()
		require.Len(t, g.GetInput(), 1)
		require.Len(t, g.GetOutput(), 1)
		assert.Equal(t, "x", g.GetInput()[0].GetName())
		assert.Equal(t, "y", g.GetOutput()[0].GetName())
		assert.Equal(t, onnxio.Float, onnxio.ElemType(g.GetInput()[0]))
		assert.Equal(t, c.in, onnxio.FormatDims(onnxio.Dims(g.GetInput()[0])), c.preset)
		assert.Equal(t, c.out, onnxio.FormatDims(onnxio.Dims(g.GetOutput()[0])), c.preset)
	}
	// Given, the width is fixed, and the output's follows.
	m, _ := presetModel(t, "seed-simple")
	g := exportModel(t, m, export.Options{Widths: map[string]int{"x": 3}}).GetGraph()
	assert.Equal(t, "[batch seq 3]", onnxio.FormatDims(onnxio.Dims(g.GetInput()[0])))
	assert.Equal(t, "[batch seq 3]", onnxio.FormatDims(onnxio.Dims(g.GetOutput()[0])))
}

// Initializers are exactly the parameters, under their model names, in
// PyTorch's layout, and no tensor anywhere in an export is bool.
func TestExportInitializersAreTheStateDict(t *testing.T) {
	for _, p := range presets(t) {
		m, _ := presetModel(t, p.Name)
		pb := exportModel(t, m, export.Options{Opset: 13})
		names, dict := m.StateDict()
		inits := pb.GetGraph().GetInitializer()
		require.Len(t, inits, len(names), p.Name)
		for i, tp := range inits {
			assert.Equal(t, names[i], tp.GetName())
			got, err := onnxio.TensorToDense(tp)
			require.NoError(t, err)
			assert.Equal(t, dict[names[i]].Shape(), got.Shape(), "%s %s", p.Name, names[i])
			assert.Equal(t, dict[names[i]].Data(), got.Data(), "%s %s", p.Name, names[i])
		}
		for _, n := range pb.GetGraph().GetNode() {
			for _, a := range n.GetAttribute() {
				if a.GetT() != nil {
					assert.NotEqual(t, int32(onnxio.Bool), a.GetT().GetDataType(), "%s: node %s holds a bool tensor", p.Name, n.GetName())
				}
			}
		}
	}
}

func TestExportLinearWeightKeepsPyTorchLayout(t *testing.T) {
	m, err := models.Parse([]byte(`
name: lin
layers:
  - {name: proj, type: nn.linear, d_in: 3, d_out: 2}
`), "lin.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(5))
	pb := exportModel(t, m, export.Options{})
	w := pb.GetGraph().GetInitializer()[0]
	assert.Equal(t, "proj.weight", w.GetName())
	assert.Equal(t, []int64{2, 3}, w.GetDims(), "(out, in), as PyTorch stores it")
	ops := opTypes(pb)
	assert.Equal(t, []string{"Transpose", "MatMul", "Add"}, ops)
}

func TestExportOpsetRange(t *testing.T) {
	m, _ := presetModel(t, "seed-simple")
	for _, opset := range []int{12, 28, -1} {
		_, err := export.Model(m, export.Options{Opset: opset})
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("opset %d is not supported (attnrun exports opsets 13 to 27)", opset))
	}
	pb := exportModel(t, m, export.Options{})
	assert.Equal(t, int64(17), onnxio.OpsetVersion(pb, ""), "default opset")
	// Each opset is written with the IR version it was released with.
	for opset, ir := range map[int]int64{13: 8, 18: 8, 19: 9, 20: 9, 21: 10, 23: 10, 24: 10, 25: 10, 26: 10, 27: 10} {
		pb := exportModel(t, m, export.Options{Opset: opset})
		assert.Equal(t, int64(opset), onnxio.OpsetVersion(pb, ""))
		assert.Equal(t, ir, pb.GetIrVersion(), "opset %d", opset)
	}
}

func TestExportNeedsTheConfigText(t *testing.T) {
	cfg, err := models.ParseConfig([]byte("name: m\nlayers:\n  - {name: a, type: attention.average}\n"), "m.yaml")
	require.NoError(t, err)
	cfg.YAML = nil // as a config assembled in code
	m, err := models.New(cfg)
	require.NoError(t, err)
	_, err = export.Model(m, export.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `export model "m": the config has no YAML text`)
}

func TestExportWidthErrors(t *testing.T) {
	m, _ := presetModel(t, "seed-mha-wrapper")
	_, err := export.Model(m, export.Options{Widths: map[string]int{"memory": 3}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `a width is given for "memory", which is not an input of the model (inputs: "x")`)

	_, err = export.Model(m, export.Options{Widths: map[string]int{"x": 4}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `the model does not accept input widths x=4: layer "attn" (attention.multihead_wrapper): d_in mismatch`)
}

// A model without parameters exports with a symbolic width, and the scale
// of scaled simple attention is then computed from the input's shape.
func TestExportSymbolicWidthScaledSimple(t *testing.T) {
	m, err := models.Parse([]byte(`
name: scaled
layers:
  - {name: attn, type: attention.simple, scaled: true, causal: true}
  - {name: avg, type: attention.average}
  - {name: drop, type: nn.dropout, p: 0.2}
`), "scaled.yaml")
	require.NoError(t, err)
	g := exportGraph(t, m, export.Options{Opset: 13})
	for _, d := range []int{3, 5} {
		x := randomInput(2, 4, d, uint64(d))
		assertClose(t, forward(t, m, x).Data().([]float32), runGraph(t, g, x))
	}
}

// Sequences longer than context_length fail in the export as they fail in
// attnrun: the causal mask and the position table are looked up in tables
// of that length.
func TestExportRefusesSequencesBeyondContext(t *testing.T) {
	for _, name := range []string{"seed-bishop-causal", "seed-mha-wrapper", "seed-bishop-multihead", "seed-bishop-positional"} {
		m, x := presetModel(t, name)
		g := exportGraph(t, m, export.Options{})
		ctx := 6
		if name != "seed-mha-wrapper" {
			ctx = 5
		}
		_, err := m.Forward(nil, randomInput(1, ctx+1, lastDim(x), 3))
		require.Error(t, err, name)
		_, err = g.Run(map[string]*tensor.Dense{"x": randomInput(1, ctx+1, lastDim(x), 3)})
		require.Error(t, err, "%s: the export ran beyond context_length %d", name, ctx)
		t.Logf("%s, %d tokens: %v", name, ctx+1, err)
		_, err = g.Run(map[string]*tensor.Dense{"x": randomInput(1, ctx, lastDim(x), 3)})
		require.NoError(t, err, name)
	}
}

// The model's output may be a model input (an identity model), or a layer
// in the middle; a model input named y does not collide with the output.
func TestExportOutputNaming(t *testing.T) {
	m, err := models.Parse([]byte(`
name: passthrough
inputs: [y]
layers:
  - {name: drop, type: nn.dropout}
`), "p.yaml")
	require.NoError(t, err)
	pb := exportModel(t, m, export.Options{})
	assert.Equal(t, "y_1", pb.GetGraph().GetOutput()[0].GetName())
	assert.Equal(t, []string{"Identity"}, opTypes(pb))
	g, err := exec.New(pb)
	require.NoError(t, err)
	x := randomInput(1, 2, 3, 1)
	out, err := g.Run(map[string]*tensor.Dense{"y": x})
	require.NoError(t, err)
	assert.Equal(t, x.Data(), out["y_1"].Data())

	m, err = models.Parse([]byte(`
name: middle
output: a
layers:
  - {name: a, type: nn.linear, d_in: 2, d_out: 2}
  - {name: b, type: nn.linear, d_in: 2, d_out: 2}
  - {name: sum, type: nn.add, inputs: [a, b]}
`), "m.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(1))
	gr := exportGraph(t, m, export.Options{})
	x = randomInput(2, 3, 2, 2)
	assertClose(t, forward(t, m, x).Data().([]float32), runGraph(t, gr, x))
}

func TestExportTwoInputs(t *testing.T) {
	m, err := models.Parse([]byte(`
name: two
inputs: [x, memory]
layers:
  - {name: px, type: nn.linear, inputs: [x], d_in: 3, d_out: 4}
  - {name: pm, type: nn.linear, inputs: [memory], d_in: 5, d_out: 4}
  - {name: sum, type: nn.add, inputs: [px, pm, px]}
  - {name: cat, type: nn.concat, inputs: [sum, px]}
`), "two.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(9))
	pb := exportModel(t, m, export.Options{})
	ins := pb.GetGraph().GetInput()
	require.Len(t, ins, 2)
	assert.Equal(t, "[batch seq 3]", onnxio.FormatDims(onnxio.Dims(ins[0])))
	assert.Equal(t, "[batch seq_memory 5]", onnxio.FormatDims(onnxio.Dims(ins[1])))
	assert.Equal(t, "[batch ? 8]", onnxio.FormatDims(onnxio.Dims(pb.GetGraph().GetOutput()[0])))
	g, err := exec.New(pb)
	require.NoError(t, err)
	x, mem := randomInput(2, 4, 3, 1), randomInput(2, 4, 5, 2)
	want, err := m.Forward(nil, x, mem)
	require.NoError(t, err)
	out, err := g.Run(map[string]*tensor.Dense{"x": x, "memory": mem})
	require.NoError(t, err)
	assertClose(t, want.Data().([]float32), out["y"].Data().([]float32))
}

func TestExportLayerErrors(t *testing.T) {
	for _, c := range []struct {
		layer, want string
	}{
		{"exporttest.plain", `export model "bad": layer "odd" (exporttest.plain): cannot be exported to ONNX: *export_test.plainLayer does not implement registry.Exporter`},
		{"exporttest.bad_param", `layer "odd" (exporttest.bad_param): ExportONNX asked for parameter "nope"; the layer has parameters "w"`},
		{"exporttest.panics", `layer "odd" (exporttest.panics): panic in ExportONNX: boom`},
		{"exporttest.no_output", `layer "odd" (exporttest.no_output): ExportONNX returned "nowhere", which no node produces and which is not one of its inputs`},
		{"exporttest.bad_attr", `layer "odd" (exporttest.bad_attr): node /odd/Softmax: attribute "axis" has a value of type bool`},
		{"exporttest.bad_const", `layer "odd" (exporttest.bad_const): constant of shape [2 2] needs 4 values, got 3`},
	} {
		m, err := models.Parse([]byte(fmt.Sprintf(`
name: bad
layers:
  - {name: first, type: nn.linear, d_in: 2, d_out: 2}
  - {name: odd, type: %s}
`, c.layer)), "bad.yaml")
		require.NoError(t, err)
		_, err = export.Model(m, export.Options{})
		require.Error(t, err, c.layer)
		assert.Contains(t, err.Error(), c.want)
	}
}

// Test layers for the error paths, registered once for this test binary.

type plainLayer struct{}

func (plainLayer) Validate() error          { return nil }
func (plainLayer) Params() []registry.Param { return nil }
func (plainLayer) Forward(_ *registry.Run, in []*tensor.Dense) (*tensor.Dense, error) {
	return in[0], nil
}

// funcLayer is a plainLayer with a parameter "w" and an ExportONNX.
type funcLayer struct {
	plainLayer
	w      *tensor.Dense
	export func(g registry.GraphBuilder, inputs []string) (string, error)
}

func (f *funcLayer) Params() []registry.Param {
	return []registry.Param{{Name: "w", Value: f.w, Init: registry.ConstantInit(1)}}
}

func (f *funcLayer) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	return f.export(g, inputs)
}

func init() {
	registry.Register(registry.Info{ID: "exporttest.plain", Summary: "test", New: func() registry.Layer { return &plainLayer{} }})
	for id, export := range map[string]func(registry.GraphBuilder, []string) (string, error){
		"exporttest.bad_param": func(g registry.GraphBuilder, in []string) (string, error) {
			return g.Node("Add", []string{in[0], g.Param("nope")}), nil
		},
		"exporttest.panics": func(registry.GraphBuilder, []string) (string, error) { panic("boom") },
		"exporttest.no_output": func(registry.GraphBuilder, []string) (string, error) {
			return "nowhere", nil
		},
		"exporttest.bad_attr": func(g registry.GraphBuilder, in []string) (string, error) {
			return g.Node("Softmax", in, registry.Attr{Name: "axis", Value: true}), nil
		},
		"exporttest.bad_const": func(g registry.GraphBuilder, in []string) (string, error) {
			return g.Node("Add", []string{in[0], g.ConstFloat([]float32{1, 2, 3}, 2, 2)}), nil
		},
	} {
		registry.Register(registry.Info{ID: id, Summary: "test", New: func() registry.Layer {
			return &funcLayer{w: tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 1})), export: export}
		}})
	}
}

// Helpers.

func presets(t *testing.T) []models.Preset {
	t.Helper()
	list, err := models.Presets()
	require.NoError(t, err)
	require.NotEmpty(t, list)
	return list
}

func presetModel(t *testing.T, name string) (*models.Model, *tensor.Dense) {
	t.Helper()
	p, err := models.LookupPreset(name)
	require.NoError(t, err)
	m, err := p.Model()
	require.NoError(t, err)
	x, err := p.Input()
	require.NoError(t, err)
	return m, x
}

func exportModel(t *testing.T, m *models.Model, opts export.Options) *onnxpb.ModelProto {
	t.Helper()
	pb, err := export.Model(m, opts)
	require.NoError(t, err)
	return pb
}

func encode(t *testing.T, pb *onnxpb.ModelProto) []byte {
	t.Helper()
	data, err := onnxio.EncodeModel(pb)
	require.NoError(t, err)
	return data
}

// exportGraph exports, encodes, decodes and prepares the model for the
// executor: the path a file takes.
func exportGraph(t *testing.T, m *models.Model, opts export.Options) *exec.Graph {
	t.Helper()
	pb, err := onnxio.DecodeModel(encode(t, exportModel(t, m, opts)), "", onnxio.DefaultLimits)
	require.NoError(t, err)
	g, err := exec.New(pb)
	require.NoError(t, err)
	return g
}

func runGraph(t *testing.T, g *exec.Graph, x *tensor.Dense) []float32 {
	t.Helper()
	out, err := g.Run(map[string]*tensor.Dense{"x": x})
	require.NoError(t, err)
	y := out["y"]
	require.NotNil(t, y)
	require.Equal(t, 3, y.Dims())
	return y.Data().([]float32)
}

func forward(t *testing.T, m *models.Model, x *tensor.Dense) *tensor.Dense {
	t.Helper()
	y, err := m.Forward(nil, x)
	require.NoError(t, err)
	return y
}

// batched feeds a (T, d) input as (1, T, d).
func batched(x *tensor.Dense) *tensor.Dense {
	if x.Dims() == 3 {
		return x
	}
	s := x.Shape()
	return tensor.New(tensor.WithShape(1, s[0], s[1]), tensor.WithBacking(x.Data()))
}

func lastDim(x *tensor.Dense) int { return x.Shape()[x.Dims()-1] }
func seqLen(x *tensor.Dense) int  { return x.Shape()[x.Dims()-2] }

func randomInput(b, n, d int, seed uint64) *tensor.Dense {
	r := rand.New(rand.NewPCG(seed, 1))
	data := make([]float32, b*n*d)
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	return tensor.New(tensor.WithShape(b, n, d), tensor.WithBacking(data))
}

func assertClose(t *testing.T, want, got []float32) {
	t.Helper()
	require.Len(t, got, len(want))
	worst := 0.0
	for i := range want {
		diff := math.Abs(float64(got[i]) - float64(want[i]))
		worst = max(worst, diff)
		if !(diff <= 1e-6+1e-5*math.Abs(float64(want[i]))) {
			t.Fatalf("element %d: got %g, want %g (|diff| %.3g)", i, got[i], want[i], diff)
		}
	}
}

func opTypes(pb *onnxpb.ModelProto) []string {
	var ops []string
	for _, n := range pb.GetGraph().GetNode() {
		if n.GetOpType() != "Constant" {
			ops = append(ops, n.GetOpType())
		}
	}
	return ops
}

func paramNames(m *models.Model) []string {
	var names []string
	for _, p := range m.Params() {
		names = append(names, p.Name)
	}
	return names
}
