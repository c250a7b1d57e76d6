package layers

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
	"github.com/attnrun/attnrun/tensorio"
)

// The live cross-check of the modern layers (scripts/modern_crosscheck.sh):
// testdata/torch/modern.py --seed N --out DIR writes fresh PyTorch
// references to DIR/modern_cases.json and DIR/blocks/, and
//
//	ATTNRUN_MODERN_CASES=DIR/modern_cases.json go test ./layers -run Live -v
//
// checks attnrun against them: every layer's Forward, its ONNX export run
// by the executor, and the GPT-2, Llama and decoder blocks. Without the
// variable these tests skip; the committed references are checked by
// TestModernAgainstPyTorch and models' TestBlocksMatchPyTorch.
const liveCasesEnv = "ATTNRUN_MODERN_CASES"

// liveExportsEnv, when set, names a directory where
// TestLiveModernExportsAgainstPyTorch and TestLiveBlocksAgainstPyTorch
// also write each export they check,
// with its inputs and PyTorch's output (CASE.opsetN/model.onnx,
// input_K.npy, expected.npy), for ONNX Runtime to run.
const liveExportsEnv = "ATTNRUN_MODERN_EXPORTS"

// liveOpsets are the opsets the live check exports at: the decomposed
// LayerNorm (13), LayerNormalization (17), and the Attention and
// RotaryEmbedding ops (23).
var liveOpsets = []int{13, 17, 23}

// liveCases reads the cases the environment names, or skips the test.
func liveCases(t *testing.T) (string, []string, map[string]modernCase) {
	t.Helper()
	path := os.Getenv(liveCasesEnv)
	if path == "" {
		t.Skipf("%s is not set: run scripts/modern_crosscheck.sh", liveCasesEnv)
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var cases map[string]modernCase
	require.NoError(t, json.Unmarshal(b, &cases), path)
	require.NotEmpty(t, cases, path)
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	return filepath.Dir(path), names, cases
}

// TestLiveModernAgainstPyTorch runs every fresh case: the layer built from
// its config and PyTorch's state dict gives PyTorch's output (NaN where it
// has NaN) and attention weights.
func TestLiveModernAgainstPyTorch(t *testing.T) {
	_, names, cases := liveCases(t)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := cases[name]
			var weights *tensor.Dense
			out, err := c.layer(t).Forward(&registry.Run{Layer: name, Hook: func(_ string, w *tensor.Dense) { weights = w }}, c.inputs())
			require.NoError(t, err)
			require.Equal(t, c.Output.Shape, []int(out.Shape()), "output shape")
			c.assertOutput(t, floats(out), "output")
			if c.Weights != nil {
				require.NotNil(t, weights, "the hook received no weights")
				require.Equal(t, c.Weights.Shape, []int(weights.Shape()), "weights shape")
				assertCloseNaN(t, c.Weights.Data, floats(weights), torchAbs, torchRel, "weights")
			}
		})
	}
}

// TestLiveModernExportsAgainstPyTorch exports every fresh case's layer as a
// one-layer model at each of liveOpsets and runs it on the executor with
// the case's inputs: the graph must give PyTorch's output too. Inputs of a
// lower rank than the export declares get leading axes of 1 (a (T, d)
// input is fed (1, T, d), a (Tq, Tk) mask (1, 1, Tq, Tk)).
func TestLiveModernExportsAgainstPyTorch(t *testing.T) {
	_, names, cases := liveCases(t)
	for _, name := range names {
		for _, opset := range liveOpsets {
			t.Run(fmt.Sprintf("%s/opset%d", name, opset), func(t *testing.T) {
				c := cases[name]
				m := c.model(t)
				pb, err := export.Model(m, export.Options{Opset: opset})
				require.NoError(t, err)
				g, err := exec.New(pb)
				require.NoError(t, err)
				feeds := map[string]*tensor.Dense{}
				for i, vi := range pb.GetGraph().GetInput() {
					x := c.inputs()[i]
					want := len(onnxio.Dims(vi))
					if x.Dims() > want {
						t.Skipf("input %s has rank %d; the export declares rank %d (a per-head attn_mask cannot be declared)", vi.GetName(), x.Dims(), want)
					}
					feeds[vi.GetName()] = c.fedAs(x, want, m, i)
				}
				outs, err := g.Run(feeds)
				require.NoError(t, err)
				y := outs[export.OutputName]
				require.Equal(t, volume(c.Output.Shape), volume(y.Shape()), "output shape %v, PyTorch's %v", y.Shape(), c.Output.Shape)
				c.assertOutput(t, floats(y), "output")
				if dir := os.Getenv(liveExportsEnv); dir != "" {
					export := filepath.Join(dir, fmt.Sprintf("%s.opset%d", name, opset))
					writeLiveExport(t, export, pb, feeds, newDense(y.Shape(), c.Output.Data))
					if c.Float64 != nil {
						require.NoError(t, tensorio.WriteNPYFile(filepath.Join(export, "expected_float64.npy"), newDense(y.Shape(), c.Float64.Data)))
					}
				}
			})
		}
	}
}

// TestLiveBlocksAgainstPyTorch builds each fresh block from its YAML with
// PyTorch's weights: Forward, and its exports run by the executor, give
// the PyTorch module's output.
func TestLiveBlocksAgainstPyTorch(t *testing.T) {
	dir, _, _ := liveCases(t)
	folders, err := filepath.Glob(filepath.Join(dir, "blocks", "*"))
	require.NoError(t, err)
	require.NotEmpty(t, folders, "no blocks under %s", dir)
	for _, folder := range folders {
		name := filepath.Base(folder)
		m, err := models.Load(filepath.Join(folder, "model.yaml"))
		require.NoError(t, err)
		require.NoError(t, m.LoadWeights(filepath.Join(folder, "weights.npz")))
		var inputs []*tensor.Dense
		feeds := map[string]*tensor.Dense{}
		for k, in := range m.Config().Inputs {
			x, err := tensorio.ReadNPYFile(filepath.Join(folder, fmt.Sprintf("input_%d.npy", k)))
			require.NoError(t, err)
			inputs = append(inputs, x)
			feeds[in] = x
		}
		want, err := tensorio.ReadNPYFile(filepath.Join(folder, "expected.npy"))
		require.NoError(t, err)
		t.Run(name+"/forward", func(t *testing.T) {
			out, err := m.Forward(&registry.Run{}, inputs...)
			require.NoError(t, err)
			require.Equal(t, want.Shape(), out.Shape())
			assertCloseNaN(t, floats(want), floats(out), torchAbs, torchRel, "output")
		})
		for _, opset := range liveOpsets {
			t.Run(fmt.Sprintf("%s/opset%d", name, opset), func(t *testing.T) {
				pb, err := export.Model(m, export.Options{Opset: opset})
				require.NoError(t, err)
				g, err := exec.New(pb)
				require.NoError(t, err)
				outs, err := g.Run(feeds)
				require.NoError(t, err)
				y := outs[export.OutputName]
				require.Equal(t, want.Shape(), y.Shape())
				assertCloseNaN(t, floats(want), floats(y), torchAbs, torchRel, "output")
				if dir := os.Getenv(liveExportsEnv); dir != "" {
					writeLiveExport(t, filepath.Join(dir, fmt.Sprintf("block_%s.opset%d", name, opset)), pb, feeds, want)
				}
			})
		}
	}
}

// model wraps the case's layer in a one-layer model (inputs in0, in1, …)
// with PyTorch's parameters, for export.
func (c modernCase) model(t *testing.T) *models.Model {
	t.Helper()
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(c.Config, &fields))
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	inputs := make([]string, len(c.Inputs))
	for i := range inputs {
		inputs[i] = fmt.Sprintf("in%d", i)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name: live\ninputs: [%s]\nlayers:\n  - {name: layer, type: %s, inputs: [%s]",
		strings.Join(inputs, ", "), c.Type, strings.Join(inputs, ", "))
	for _, k := range keys {
		fmt.Fprintf(&b, ", %s: %s", k, fields[k]) // JSON values are YAML flow values
	}
	b.WriteString("}\n")
	m, err := models.Parse([]byte(b.String()), "live.yaml")
	require.NoError(t, err, b.String())
	dict := map[string]*tensor.Dense{}
	for _, n := range c.Params.Names {
		dict["layer."+n] = c.Params.Values[n].dense()
	}
	require.NoError(t, m.LoadStateDict(dict))
	return m
}

// fedAs gives an input the rank the export declares: leading axes of 1,
// or for the token inputs of a sequence-first attention.torch_mha (whose
// export declares (seq, batch, d)) a batch axis of 1 in second place.
func (c modernCase) fedAs(x *tensor.Dense, rank int, m *models.Model, i int) *tensor.Dense {
	shape := []int(x.Shape().Clone())
	if len(shape) == rank {
		return x
	}
	if d, ok := m.Layers()[0].Layer.(interface{ ONNXInputDims(int) map[int][]string }); ok {
		if dims := d.ONNXInputDims(len(c.Inputs))[i]; len(dims) == 3 && dims[0] == "seq" && len(shape) == 2 {
			return newDense([]int{shape[0], 1, shape[1]}, floats(x))
		}
	}
	for len(shape) < rank {
		shape = append([]int{1}, shape...)
	}
	return newDense(shape, floats(x))
}

// writeLiveExport writes an export, its inputs in graph order and the
// expected output for ONNX Runtime (see liveExportsEnv).
func writeLiveExport(t *testing.T, dir string, pb *onnxpb.ModelProto, feeds map[string]*tensor.Dense, want *tensor.Dense) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	data, err := onnxio.EncodeModel(pb)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.onnx"), data, 0o644))
	for k, vi := range pb.GetGraph().GetInput() {
		require.NoError(t, tensorio.WriteNPYFile(filepath.Join(dir, fmt.Sprintf("input_%d.npy", k)), feeds[vi.GetName()]))
	}
	require.NoError(t, tensorio.WriteNPYFile(filepath.Join(dir, "expected.npy"), want))
}
