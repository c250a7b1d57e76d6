package layers

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
)

// scaledDotProductCases are the F.scaled_dot_product_attention fixtures of
// testdata/pytorch2 (torch_cases.py) and the config each one is.
var scaledDotProductCases = []struct {
	fixture, config string
}{
	{"sdpa_causal_dynamo18", "causal: true"},
	{"sdpa_bool_mask_dynamo18", "mask: bool, mask_polarity: keep"},
	{"sdpa_float_mask_dynamo18", "mask: additive, scale: 0.3"},
	{"sdpa_gqa_dynamo18", "causal: true"}, // 4 query heads over 2 KV heads
}

// scaledDotProductModel is a model of one attention.scaled_dot_product
// layer reading the model's inputs.
func scaledDotProductModel(t *testing.T, config string, inputs int) *models.Model {
	t.Helper()
	names := "query, key, value"
	if inputs == 4 {
		names += ", attn_mask"
	}
	yaml := fmt.Sprintf("name: sdpa\ninputs: [%s]\nlayers:\n  - {name: attn, type: attention.scaled_dot_product, inputs: [%s], %s}\n", names, names, config)
	m, err := models.Parse([]byte(yaml), "sdpa.yaml")
	require.NoError(t, err, yaml)
	return m
}

// sdpaDataSet reads one test-data set of a fixture: the inputs (a bool
// mask as 0 and 1) and PyTorch's output.
func sdpaDataSet(t *testing.T, set string) ([]*tensor.Dense, *tensor.Dense) {
	t.Helper()
	ds, err := onnxio.ReadDataSet(set)
	require.NoError(t, err)
	var inputs []*tensor.Dense
	for _, tp := range ds.Inputs {
		x, err := onnxio.TensorToDense(tp)
		require.NoError(t, err)
		if b, ok := x.Data().([]bool); ok {
			f := make([]float32, len(b))
			for i, v := range b {
				if v {
					f[i] = 1
				}
			}
			x = tensor.New(tensor.WithShape(x.Shape().Clone()...), tensor.WithBacking(f))
		}
		inputs = append(inputs, x)
	}
	require.Len(t, ds.Outputs, 1)
	want, err := onnxio.TensorToDense(ds.Outputs[0])
	require.NoError(t, err)
	return inputs, want
}

// requireTorchClose compares with PyTorch at 1e-5 relative, 1e-6 absolute.
func requireTorchClose(t *testing.T, want, got *tensor.Dense, what string) {
	t.Helper()
	require.Equal(t, []int(want.Shape()), []int(got.Shape()), what)
	w, g := want.Data().([]float32), got.Data().([]float32)
	for i := range w {
		if d := math.Abs(float64(w[i] - g[i])); !(d <= torchAbs+torchRel*math.Abs(float64(w[i]))) {
			t.Fatalf("%s: element %d is %g, PyTorch %g", what, i, g[i], w[i])
		}
	}
}

// attention.scaled_dot_product gives PyTorch's
// F.scaled_dot_product_attention on every data set of the fixtures
// (causal, bool mask over 5 queries and 7 keys, additive float mask with
// -inf and scale 0.3, grouped-query attention), and so does its ONNX export
// at opsets 17 and 23 on the executor.
func TestScaledDotProductAgainstPyTorch(t *testing.T) {
	for _, c := range scaledDotProductCases {
		dir := filepath.Join("..", "testdata", "pytorch2", "fixtures", c.fixture)
		sets, err := onnxio.DataSetDirs(dir)
		require.NoError(t, err)
		require.Len(t, sets, 2)
		for _, set := range sets {
			t.Run(c.fixture+"/"+filepath.Base(set), func(t *testing.T) {
				inputs, want := sdpaDataSet(t, set)
				m := scaledDotProductModel(t, c.config, len(inputs))
				got, err := m.Forward(nil, inputs...)
				require.NoError(t, err)
				requireTorchClose(t, want, got, "forward")
				for _, opset := range []int{17, 23} {
					pb, err := export.Model(m, export.Options{Opset: opset})
					require.NoError(t, err)
					g, err := exec.New(pb)
					require.NoError(t, err)
					feeds := map[string]*tensor.Dense{}
					for i, in := range pb.GetGraph().GetInput() {
						feeds[in.GetName()] = inputs[i]
					}
					out, err := g.Run(feeds)
					require.NoError(t, err)
					requireTorchClose(t, want, out[pb.GetGraph().GetOutput()[0].GetName()], fmt.Sprintf("export at opset %d", opset))
				}
			})
		}
	}
}

// A query that sees no key gets zeros (masked_rows: zeros, PyTorch 2.x's
// decomposition) or NaN (masked_rows: nan), in Forward and in the export.
func TestScaledDotProductMaskedRows(t *testing.T) {
	q := tensor.New(tensor.WithShape(1, 1, 2, 2), tensor.WithBacking([]float32{1, 2, 3, 4}))
	k := tensor.New(tensor.WithShape(1, 1, 2, 2), tensor.WithBacking([]float32{0.5, -1, 2, 0}))
	v := tensor.New(tensor.WithShape(1, 1, 2, 2), tensor.WithBacking([]float32{1, 10, 100, 1000}))
	mask := tensor.New(tensor.WithShape(1, 1, 2, 2), tensor.WithBacking([]float32{0, 0, 1, 0}))
	// Row 1 sees key 0 alone: its output is value 0.
	for _, c := range []struct {
		rows string
		want []float32
	}{
		{"zeros", []float32{0, 0, 1, 10}},
		{"nan", []float32{float32(math.NaN()), float32(math.NaN()), 1, 10}},
	} {
		m := scaledDotProductModel(t, "mask: bool, mask_polarity: keep, masked_rows: "+c.rows, 4)
		got, err := m.Forward(nil, q, k, v, mask)
		require.NoError(t, err)
		pb, err := export.Model(m, export.Options{})
		require.NoError(t, err)
		g, err := exec.New(pb)
		require.NoError(t, err)
		feeds := map[string]*tensor.Dense{}
		for i, in := range pb.GetGraph().GetInput() {
			feeds[in.GetName()] = []*tensor.Dense{q, k, v, mask}[i]
		}
		out, err := g.Run(feeds)
		require.NoError(t, err)
		exported := out[pb.GetGraph().GetOutput()[0].GetName()]
		for i, w := range c.want {
			for _, y := range []*tensor.Dense{got, exported} {
				x := y.Data().([]float32)[i]
				if math.IsNaN(float64(w)) {
					require.True(t, math.IsNaN(float64(x)), "%s: element %d is %g, want NaN", c.rows, i, x)
				} else {
					require.Equal(t, w, x, "%s: element %d", c.rows, i)
				}
			}
		}
	}
}

// Validate names what a config gets wrong; Forward refuses shapes that do
// not fit.
func TestScaledDotProductRefuses(t *testing.T) {
	for config, want := range map[string]string{
		"mask: bool":                          "mask_polarity is required",
		"mask: additive, mask_polarity: keep": "mask_polarity applies to mask: bool",
		"scale: -1":                           "scale -1",
		"masked_rows: drop":                   `masked_rows "drop"`,
		"mask: soft":                          `mask "soft"`,
	} {
		s := &ScaledDotProduct{MaskedRows: "zeros"}
		require.NoError(t, yaml.Unmarshal([]byte("{"+config+"}"), s))
		require.ErrorContains(t, s.Validate(), want, config)
	}
	s := &ScaledDotProduct{MaskedRows: "zeros"}
	require.NoError(t, s.Validate())
	q := tensor.New(tensor.WithShape(1, 3, 2, 4), tensor.WithBacking(make([]float32, 24)))
	kv := tensor.New(tensor.WithShape(1, 2, 2, 4), tensor.WithBacking(make([]float32, 16)))
	_, err := s.Forward(nil, []*tensor.Dense{q, kv, kv})
	require.ErrorContains(t, err, "the key/value heads must divide the query heads")
	_, err = s.Forward(nil, []*tensor.Dense{q, kv})
	require.ErrorContains(t, err, "takes 3 inputs")
}
