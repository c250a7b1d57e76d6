package layers_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// exportConfigs are the round-trip configs, one or more per built-in layer;
// scripts/export_roundtrip.sh runs the same files in ONNX Runtime.
const exportConfigs = "../testdata/export"

var builtinIDs = []string{
	"attention.simple", "attention.self", "attention.causal", "attention.multihead_wrapper",
	"attention.multihead", "attention.average", "position.learned",
	"nn.linear", "nn.dropout", "nn.concat", "nn.add",
}

func TestEveryBuiltinLayerExports(t *testing.T) {
	for _, id := range builtinIDs {
		info, err := registry.Lookup(id)
		require.NoError(t, err)
		_, ok := info.New().(registry.Exporter)
		assert.True(t, ok, "%s does not implement registry.Exporter", id)
	}
	// And every one of them is in a round-trip config.
	covered := map[string]bool{}
	for _, c := range loadExportConfigs(t) {
		for _, l := range c.model.Layers() {
			covered[l.Type] = true
		}
	}
	for _, id := range builtinIDs {
		assert.True(t, covered[id], "no config in %s uses %s", exportConfigs, id)
	}
}

// Each config, with seeded weights, exports at every opset and gives on the
// executor what Forward gives: on its (B, T, d) input, on the first
// sequence alone as (T, d) (fed as (1, T, d)), and on a shorter batch.
func TestExportConfigsMatchForward(t *testing.T) {
	for _, c := range loadExportConfigs(t) {
		for opset := export.MinOpset; opset <= export.MaxOpset; opset++ {
			t.Run(fmt.Sprintf("%s/opset%d", c.name, opset), func(t *testing.T) {
				pb, err := export.Model(c.model, export.Options{Opset: opset})
				require.NoError(t, err)
				data, err := onnxio.EncodeModel(pb)
				require.NoError(t, err)
				pb, err = onnxio.DecodeModel(data, "", onnxio.DefaultLimits)
				require.NoError(t, err)
				g, err := exec.New(pb)
				require.NoError(t, err)

				x := randomTensor(c.shape, 42)
				assertSameAsForward(t, c.model, g, x, x)

				b, n, d := c.shape[0], c.shape[1], c.shape[2]
				first := tensor.New(tensor.WithShape(n, d), tensor.WithBacking(x.Data().([]float32)[:n*d]))
				assertSameAsForward(t, c.model, g, first, tensor.New(tensor.WithShape(1, n, d), tensor.WithBacking(first.Data())))

				short := randomTensor([]int{b + 1, max(n-2, 1), d}, 7)
				assertSameAsForward(t, c.model, g, short, short)
			})
		}
	}
}

// The graphs are built from the ops the layers' doc comments promise.
func TestExportedOps(t *testing.T) {
	for _, c := range []struct {
		config string
		ops    []string
	}{
		{"linear.yaml", []string{"Transpose", "MatMul", "Add", "Transpose", "MatMul"}},
		{"dropout.yaml", []string{"Transpose", "MatMul", "Add", "Transpose", "MatMul", "Add"}},
		{"simple.yaml", []string{"Transpose", "MatMul", "Softmax", "MatMul"}},
		{"self_matrix.yaml", []string{"MatMul", "MatMul", "MatMul", "Transpose", "MatMul", "Softmax", "MatMul"}},
		{"position_learned.yaml", []string{"Shape", "Gather", "Range", "Gather", "Add"}},
		{"average.yaml", []string{"Shape", "Gather", "Range", "Unsqueeze", "Unsqueeze", "Greater", "Where", "Softmax", "MatMul"}},
		// No parameters: the width is symbolic, and 1/√d comes from the shape.
		{"simple_scaled_causal.yaml", []string{
			"Shape", "Gather", "Cast", "Sqrt", "Reciprocal", // 1/√d
			"Shape", "Gather", "Range", "Unsqueeze", "Unsqueeze", "Greater", // mask
			"Transpose", "MatMul", "Mul", "Where", "Softmax", "MatMul",
		}},
	} {
		cfg := loadExportConfig(t, filepath.Join(exportConfigs, c.config))
		pb, err := export.Model(cfg.model, export.Options{})
		require.NoError(t, err)
		assert.Equal(t, c.ops, opTypes(pb), c.config)
	}
	// Multi-head attention splits and merges heads with Reshape/Transpose,
	// and its causal mask is bounded by context_length (a Gather on the
	// position table).
	cfg := loadExportConfig(t, filepath.Join(exportConfigs, "multihead.yaml"))
	pb, err := export.Model(cfg.model, export.Options{})
	require.NoError(t, err)
	ops := opTypes(pb)
	assert.Equal(t, 4, countOps(ops, "Reshape"), "%v", ops)
	assert.Equal(t, 8, countOps(ops, "Transpose"), "%v", ops) // 4 weights, 3 splits, 1 merge
	assert.Equal(t, 2, countOps(ops, "Gather"), "%v", ops)
	assert.Equal(t, 1, countOps(ops, "Where"), "%v", ops)
}

// A layer exports only after a successful Validate, with the right number
// of inputs.
func TestExportLayerMisuse(t *testing.T) {
	for _, id := range []string{"attention.self", "attention.causal", "attention.multihead_wrapper", "attention.multihead", "position.learned", "nn.linear"} {
		info, err := registry.Lookup(id)
		require.NoError(t, err)
		_, err = info.New().(registry.Exporter).ExportONNX(nil, []string{"x"})
		require.Error(t, err, id)
		assert.Contains(t, err.Error(), "before a successful Validate", id)
	}
	for _, id := range builtinIDs {
		info, err := registry.Lookup(id)
		require.NoError(t, err)
		_, err = info.New().(registry.Exporter).ExportONNX(nil, nil)
		require.Error(t, err, id)
	}
	m, err := models.Parse([]byte(`
name: two-into-one
layers:
  - {name: a, type: nn.linear, d_in: 2, d_out: 2}
  - {name: attn, type: attention.simple, inputs: [x, a]}
`), "t.yaml")
	require.NoError(t, err)
	_, err = export.Model(m, export.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `layer "attn" (attention.simple): takes 1 input, got 2`)
}

// exportConfig is one round-trip config.
type exportConfig struct {
	name  string
	model *models.Model
	shape []int
}

var inputLine = regexp.MustCompile(`(?m)^# input: \[(\d+), (\d+), (\d+)\]$`)

func loadExportConfigs(t *testing.T) []exportConfig {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(exportConfigs, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	var out []exportConfig
	for _, p := range paths {
		out = append(out, loadExportConfig(t, p))
	}
	return out
}

func loadExportConfig(t *testing.T, path string) exportConfig {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	match := inputLine.FindStringSubmatch(string(data))
	require.NotNil(t, match, "%s has no '# input: [B, T, d]' line", path)
	shape := make([]int, 3)
	for i := range shape {
		shape[i], _ = strconv.Atoi(match[i+1])
	}
	m, err := models.Parse(data, filepath.Base(path))
	require.NoError(t, err)
	require.NoError(t, m.Init(123))
	return exportConfig{name: strings.TrimSuffix(filepath.Base(path), ".yaml"), model: m, shape: shape}
}

// assertSameAsForward runs x through Forward and fed through the graph.
func assertSameAsForward(t *testing.T, m *models.Model, g *exec.Graph, x, fed *tensor.Dense) {
	t.Helper()
	want, err := m.Forward(nil, x)
	require.NoError(t, err)
	out, err := g.Run(map[string]*tensor.Dense{"x": fed})
	require.NoError(t, err)
	got := out["y"]
	require.NotNil(t, got)
	w, gd := want.Data().([]float32), got.Data().([]float32)
	require.Len(t, gd, len(w))
	for i := range w {
		diff := math.Abs(float64(gd[i]) - float64(w[i]))
		require.LessOrEqual(t, diff, 1e-6+1e-5*math.Abs(float64(w[i])), "element %d: got %g, want %g", i, gd[i], w[i])
	}
}

func randomTensor(shape []int, seed uint64) *tensor.Dense {
	r := rand.New(rand.NewPCG(seed, 2))
	n := 1
	for _, d := range shape {
		n *= d
	}
	data := make([]float32, n)
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
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

func countOps(ops []string, op string) int {
	return len(slices.DeleteFunc(slices.Clone(ops), func(o string) bool { return o != op }))
}
