package lift_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	_ "github.com/attnrun/attnrun/layers"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/registry"
)

const fixtures = "../../testdata/onnx"

// manifestCase is one export of testdata/torch/export_onnx.py.
type manifestCase struct {
	Name   string `json:"name"`
	Case   string `json:"case"`
	Module string `json:"module"`
	Layers []struct {
		Type string `json:"type"`
	} `json:"layers"`
}

func readManifest(t *testing.T) []manifestCase {
	data, err := os.ReadFile(filepath.Join(fixtures, "manifest.json"))
	require.NoError(t, err)
	var m struct {
		Cases []manifestCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(data, &m))
	require.GreaterOrEqual(t, len(m.Cases), 90)
	return m.Cases
}

// layerTypes lists the `type:` of every layer of a config, in order.
func layerTypes(config string) []string {
	var types []string
	for _, line := range strings.Split(config, "\n") {
		entry := strings.TrimPrefix(strings.TrimSpace(line), "- ")
		if !strings.HasPrefix(entry, "{") || strings.Contains(entry, " dtype: ") { // a layer, not an input's dtype
			continue
		}
		if _, rest, ok := strings.Cut(line, " type: "); ok {
			types = append(types, strings.TrimRight(strings.SplitN(rest, ",", 2)[0], "}"))
		}
	}
	return types
}

// TestLiftPyTorchFixtures lifts every PyTorch export (each seed class,
// nn.MultiheadAttention self and cross, the transformer block; opsets
// 13-17, static and dynamic), checks the layer types against the manifest,
// and runs the
// lifted model on the export's test-data sets against PyTorch's outputs at
// 1e-5 relative / 1e-6 absolute, attention-weight outputs included.
func TestLiftPyTorchFixtures(t *testing.T) {
	for _, c := range readManifest(t) {
		t.Run(c.Name, func(t *testing.T) {
			dir := filepath.Join(fixtures, c.Name)
			m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			res, err := lift.Lift(m)
			require.NoError(t, err)
			require.NotNil(t, res.Model)
			var want []string
			for _, l := range c.Layers {
				want = append(want, l.Type)
			}
			if c.Case == "torch_mha_cross" {
				// The manifest predates attention.torch_mha: cross-attention
				// with a key padding mask is what that layer is for.
				want = []string{"attention.torch_mha"}
			}
			want = fuseMLPs(want)
			assert.Equal(t, want, layerTypes(res.Config), res.Config)
			checkDataSets(t, dir, res)
		})
	}
}

// fuseMLPs replaces each Linear, GELU, Linear of a manifest (written
// before nn.mlp existed) by the nn.mlp the lift makes of them.
func fuseMLPs(types []string) []string {
	var out []string
	for i := 0; i < len(types); i++ {
		if i+2 < len(types) && types[i] == "nn.linear" && types[i+1] == "activation.gelu" && types[i+2] == "nn.linear" {
			out = append(out, "nn.mlp")
			i += 2
			continue
		}
		out = append(out, types[i])
	}
	return out
}

// checkDataSets runs a lifted model on every test_data_set_N of dir and
// compares each output with PyTorch's.
func checkDataSets(t *testing.T, dir string, res *lift.Result) {
	t.Helper()
	sets, err := onnxio.DataSetDirs(dir)
	require.NoError(t, err)
	require.NotEmpty(t, sets)
	for _, set := range sets {
		ds, err := onnxio.ReadDataSet(set)
		require.NoError(t, err)
		var inputs []*tensor.Dense
		for _, tp := range ds.Inputs {
			if slices.Contains(tp.GetDims(), 0) { // an empty KV cache: RunOutputs reads nil as no past tokens
				inputs = append(inputs, nil)
				continue
			}
			x, err := onnxio.TensorToDense(tp)
			require.NoError(t, err)
			x, err = lift.ModelInput(x)
			require.NoError(t, err)
			inputs = append(inputs, x)
		}
		got, err := lift.RunOutputs(res.Model, res.Outputs, &registry.Run{}, inputs)
		require.NoError(t, err)
		require.Len(t, ds.Outputs, len(got))
		for i, tp := range ds.Outputs {
			want, err := onnxio.TensorToDense(tp)
			require.NoError(t, err)
			assertClose(t, want, got[i], filepath.Base(set)+" output "+res.Outputs[i].Name)
		}
	}
}

// assertClose compares elementwise as numpy.allclose(rtol=1e-5, atol=1e-6).
func assertClose(t *testing.T, want, got *tensor.Dense, what string) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape(), what)
	w, g := want.Data().([]float32), got.Data().([]float32)
	for i := range w {
		if math.IsNaN(float64(w[i])) && math.IsNaN(float64(g[i])) {
			continue
		}
		if d := math.Abs(float64(w[i] - g[i])); d > 1e-6+1e-5*math.Abs(float64(w[i])) {
			t.Fatalf("%s: element %d is %g, PyTorch %g", what, i, g[i], w[i])
		}
	}
}

// TestLiftMoreModules lifts the exports of testdata/export_more.py:
// attention without weights, unscaled causal heads, heads with their own
// position tables concatenated and projected, attention layers in
// sequence with a residual.
func TestLiftMoreModules(t *testing.T) {
	data, err := os.ReadFile("testdata/manifest.json")
	require.NoError(t, err)
	var cases []struct {
		Name   string   `json:"name"`
		Layers []string `json:"layers"`
	}
	require.NoError(t, json.Unmarshal(data, &cases))
	require.NotEmpty(t, cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			dir := filepath.Join("testdata", c.Name)
			m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			res, err := lift.Lift(m)
			require.NoError(t, err)
			assert.Equal(t, c.Layers, layerTypes(res.Config), res.Config)
			checkDataSets(t, dir, res)
		})
	}
}
