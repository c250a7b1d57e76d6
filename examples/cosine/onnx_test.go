package cosine_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/examples/cosine"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// exportOpsets are the opsets the export is checked at: the oldest, the
// default and the newest attnrun writes.
var exportOpsets = []int{export.MinOpset, export.DefaultOpset, export.MaxOpset}

// exportedOps are the ONNX ops the export writes, all in the default domain
// (Constant nodes hold the builder's constants).
var exportedOps = []string{"Add", "Constant", "Div", "Gather", "Greater", "MatMul", "Max", "Mul", "Range",
	"ReduceSum", "Shape", "Softmax", "Sqrt", "Transpose", "Unsqueeze", "Where"}

// TestExportRunsLikeForward exports each PyTorch case with PyTorch's
// weights, writes and reads the file back, and runs it with attnrun's ONNX
// executor: on PyTorch's input it gives PyTorch's output, and on a random
// batch of another size and length (the axes are dynamic) it gives what
// Forward gives.
func TestExportRunsLikeForward(t *testing.T) {
	for _, name := range cases {
		for _, opset := range exportOpsets {
			t.Run(fmt.Sprintf("%s/opset%d", name, opset), func(t *testing.T) {
				m := load(t, name)
				require.NoError(t, m.LoadWeights(testdata(name+"_weights.npz")))
				g := runnable(t, exportModel(t, m, opset))

				x := batched(readNPY(t, name+"_input.npy"))
				assertClose(t, batched(readNPY(t, name+"_expected.npy")), runGraph(t, g, x), "graph output on PyTorch's input")

				x = randomInput(3, 7, m.Config().Layers[0].Layer.(*cosine.Cosine).DIn)
				want, err := m.Forward(&registry.Run{}, x)
				require.NoError(t, err)
				assertClose(t, want, runGraph(t, g, x), "graph output on a (3, 7, d) batch")
			})
		}
	}
}

// TestExportGraph checks what the file holds: standard ops only, the
// parameters as initializers under their model names in PyTorch's layout,
// and the config in the metadata.
func TestExportGraph(t *testing.T) {
	m := load(t, "cosine")
	require.NoError(t, m.LoadWeights(testdata("cosine_weights.npz")))
	out := exportModel(t, m, export.DefaultOpset)
	for _, n := range out.GetGraph().GetNode() {
		assert.Contains(t, exportedOps, n.GetOpType(), "node %s", n.GetName())
		assert.Empty(t, n.GetDomain(), "node %s", n.GetName())
	}
	names, dict := m.StateDict()
	var inits []string
	for _, tp := range out.GetGraph().GetInitializer() {
		inits = append(inits, tp.GetName())
		d, err := onnxio.TensorToDense(tp)
		require.NoError(t, err)
		assert.Equal(t, dict[tp.GetName()].Shape(), d.Shape(), tp.GetName())
		assert.Equal(t, dict[tp.GetName()].Data(), d.Data(), tp.GetName())
	}
	assert.Equal(t, names, inits)
	config, ok := onnxio.Metadata(out, export.MetadataConfig)
	require.True(t, ok)
	assert.Contains(t, config, "type: attention.cosine")
}

// TestExportErrors checks what ExportONNX refuses, through export.Model.
func TestExportErrors(t *testing.T) {
	_, err := (&cosine.Cosine{}).ExportONNX(nil, []string{"x"})
	require.ErrorContains(t, err, "before a successful Validate")

	m, err := models.Parse([]byte(`
name: two-inputs
inputs: [x, y]
layers:
  - {name: attn, type: attention.cosine, inputs: [x, y], d_in: 4, d_out: 3}
`), "two.yaml")
	require.NoError(t, err)
	_, err = export.Model(m, export.Options{})
	require.ErrorContains(t, err, `layer "attn" (attention.cosine): takes 1 input, got 2`)
}

// TestExportImportRoundTrip writes a model as ONNX and imports the file:
// attnrun's metadata brings back the same config and the very same
// weights, so the output is the same to the bit.
func TestExportImportRoundTrip(t *testing.T) {
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			m := load(t, name)
			require.NoError(t, m.LoadWeights(testdata(name+"_weights.npz")))
			res, err := lift.Lift(exportModel(t, m, export.DefaultOpset))
			require.NoError(t, err)
			require.True(t, res.Attnrun, "loaded from the metadata")
			assert.Equal(t, string(m.Config().YAML), res.Config)
			assertSameWeights(t, m, res.Model)
			x := readNPY(t, name+"_input.npy")
			want, _ := forward(t, m, x)
			got, _ := forward(t, res.Model, x)
			assert.Equal(t, floats(want), floats(got))
		})
	}
}

// TestLiftOwnExportByStructure removes attnrun's metadata from an export,
// so that the importer has nothing but the graph: the pattern recognizes
// ExportONNX's spelling of the layer (ReduceSum, Sqrt, Max; the mask from
// Range and Greater) as well as PyTorch's.
func TestLiftOwnExportByStructure(t *testing.T) {
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			m := load(t, name)
			require.NoError(t, m.LoadWeights(testdata(name+"_weights.npz")))
			exported := exportModel(t, m, export.DefaultOpset)
			exported.MetadataProps = nil
			res, err := lift.Lift(exported)
			require.NoError(t, err)
			require.False(t, res.Attnrun)
			assert.Equal(t, layerTypes(m), layerTypes(res.Model))
			assertSameWeights(t, m, res.Model)
			x := readNPY(t, name+"_input.npy")
			want, _ := forward(t, m, x)
			got, _ := forward(t, res.Model, x)
			assertClose(t, want, got, "lifted output")
		})
	}
}

// TestLiftPyTorchExport imports torch.onnx.export's file of each
// reference model (testdata/<name>_torch.onnx): the pattern lifts it to
// attention.cosine with PyTorch's weights, and the lifted model gives
// PyTorch's output and attention weights.
func TestLiftPyTorchExport(t *testing.T) {
	tests := []struct {
		name   string
		config string // the attention layer's line in the lifted config
		types  []string
	}{
		{"cosine", "{name: attn, type: attention.cosine, d_in: 4, d_out: 3, scale: 10, causal: true, qkv_bias: true}",
			[]string{"attention.cosine", "nn.linear"}},
		{"noncausal", "{name: attn, type: attention.cosine, d_in: 3, d_out: 4, scale: 5, causal: false, qkv_bias: false}",
			[]string{"attention.cosine"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := liftTorch(t, tt.name)
			assert.Contains(t, res.Config, tt.config)
			assert.Equal(t, tt.types, layerTypes(res.Model))

			want := load(t, tt.name)
			require.NoError(t, want.LoadWeights(testdata(tt.name+"_weights.npz")))
			assertSameWeights(t, want, res.Model)
			for _, mp := range res.Mapping {
				if mp.Param == "attn.W_query.weight" {
					assert.Regexp(t, `^onnx::MatMul_\d+$`, mp.Initializer, "PyTorch renamed the transposed weight")
					assert.Equal(t, "transposed", mp.Transform)
				}
			}

			out, weights := forward(t, res.Model, readNPY(t, tt.name+"_input.npy"))
			assertClose(t, readNPY(t, tt.name+"_expected.npy"), out, "lifted model's output")
			assertClose(t, readNPY(t, tt.name+"_attention.npy"), weights, "lifted model's attention weights")
		})
	}
}

// TestLiftRefusals changes the PyTorch graph where attention.cosine
// cannot follow and checks what the importer says.
func TestLiftRefusals(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, m *onnxpb.ModelProto)
		reason string // in the report of the Softmax node
		// declined: the structure is not the pattern's, and the reason is
		// the built-in recognizer's.
		declined bool
	}{
		{"eps", func(t *testing.T, m *onnxpb.ModelProto) {
			clip := nodeOf(t, m, "Clip", 1)
			setConstantInput(t, m, clip.GetInput()[1], 1e-6)
		}, "pattern attention.cosine: queries or keys are normalized with eps 1e-06; attention.cosine uses F.normalize's default 1e-12", false},
		{"keys not normalized", func(t *testing.T, m *onnxpb.ModelProto) {
			div := nodeOf(t, m, "Div", 1)
			div.OpType, div.Input = proto("Identity"), div.GetInput()[:1]
		}, "attention: ", true},
		{"attention weights returned", func(t *testing.T, m *onnxpb.ModelProto) {
			sm := nodeOf(t, m, "Softmax", 0)
			m.Graph.Output = append(m.Graph.Output, &onnxpb.ValueInfoProto{Name: proto(sm.GetOutput()[0])})
		}, "are a graph output; attention.cosine returns its output only", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := onnxio.ReadModel(testdata("cosine_torch.onnx"))
			require.NoError(t, err)
			tt.change(t, m)
			_, err = lift.Lift(m)
			var unlifted *lift.UnliftedError
			require.True(t, errors.As(err, &unlifted), "want an UnliftedError, got %v", err)
			var reason string
			for _, u := range unlifted.Nodes {
				if u.Op == "Softmax" {
					reason = u.Reason
				}
			}
			assert.Contains(t, reason, tt.reason)
			if tt.declined {
				assert.NotContains(t, reason, "pattern", "the pattern declines a structure that is not its own")
			}
		})
	}
}

// TestPatternRegistered checks that importing the package registered the
// pattern with the importer.
func TestPatternRegistered(t *testing.T) {
	assert.Contains(t, match.Patterns(), "attention.cosine")
}

// export exports m at an opset, encodes it and decodes the bytes, so that
// the test sees what a file holds.
func exportModel(t *testing.T, m *models.Model, opset int) *onnxpb.ModelProto {
	t.Helper()
	out, err := export.Model(m, export.Options{Opset: opset})
	require.NoError(t, err)
	data, err := onnxio.EncodeModel(out)
	require.NoError(t, err)
	back, err := onnxio.DecodeModel(data, "", onnxio.DefaultLimits)
	require.NoError(t, err)
	return back
}

// runnable prepares a graph for attnrun's executor.
func runnable(t *testing.T, m *onnxpb.ModelProto) *exec.Graph {
	t.Helper()
	g, err := exec.New(m)
	require.NoError(t, err)
	return g
}

// runGraph runs an exported graph on x and returns its output "y".
func runGraph(t *testing.T, g *exec.Graph, x *tensor.Dense) *tensor.Dense {
	t.Helper()
	out, err := g.Run(map[string]*tensor.Dense{"x": x})
	require.NoError(t, err)
	require.Contains(t, out, export.OutputName)
	return out[export.OutputName]
}

// liftTorch lifts testdata/<name>_torch.onnx.
func liftTorch(t *testing.T, name string) *lift.Result {
	t.Helper()
	m, err := onnxio.ReadModel(testdata(name + "_torch.onnx"))
	require.NoError(t, err)
	res, err := lift.Lift(m)
	require.NoError(t, err)
	require.NotNil(t, res.Model)
	return res
}

// batched views a (T, d) tensor as (1, T, d), as an export takes it.
func batched(x *tensor.Dense) *tensor.Dense {
	if x.Dims() != 2 {
		return x
	}
	return tensor.New(tensor.WithShape(append([]int{1}, x.Shape()...)...), tensor.WithBacking(x.Data()))
}

// layerTypes lists a model's layer types in config order.
func layerTypes(m *models.Model) []string {
	var types []string
	for _, l := range m.Layers() {
		types = append(types, l.Type)
	}
	return types
}

// assertSameWeights checks that two models hold the same parameters under
// the same names, to the bit.
func assertSameWeights(t *testing.T, want, got *models.Model) {
	t.Helper()
	wantNames, wantDict := want.StateDict()
	gotNames, gotDict := got.StateDict()
	require.Equal(t, wantNames, gotNames)
	for _, n := range wantNames {
		assert.Equal(t, wantDict[n].Shape(), gotDict[n].Shape(), n)
		assert.Equal(t, wantDict[n].Data(), gotDict[n].Data(), n)
	}
}

// nodeOf returns the k-th node (from 0) of an op type.
func nodeOf(t *testing.T, m *onnxpb.ModelProto, op string, k int) *onnxpb.NodeProto {
	t.Helper()
	i := slices.IndexFunc(m.GetGraph().GetNode(), func(n *onnxpb.NodeProto) bool {
		if n.GetOpType() != op {
			return false
		}
		k--
		return k < 0
	})
	require.GreaterOrEqual(t, i, 0, "no %s node number %d", op, k)
	return m.GetGraph().GetNode()[i]
}

// setConstantInput makes the Constant node that writes value hold a
// float32 scalar.
func setConstantInput(t *testing.T, m *onnxpb.ModelProto, value string, v float32) {
	t.Helper()
	for _, n := range m.GetGraph().GetNode() {
		if n.GetOpType() == "Constant" && n.GetOutput()[0] == value {
			tp, err := onnxio.DenseToTensor("", tensor.New(tensor.FromScalar(v)))
			require.NoError(t, err)
			n.Attribute[0].T = tp
			return
		}
	}
	t.Fatalf("no Constant node writes %q", value)
}

// proto returns a pointer to a string, as protobuf's optional fields take.
func proto(s string) *string { return &s }
