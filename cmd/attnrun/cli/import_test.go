package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// liftFixtures is the lifter's own fixtures (onnxio/lift/testdata):
// unbatched (T, d) exports among them.
const liftFixtures = "../../../onnxio/lift/testdata"

// TestImportPyTorchFixtures imports every PyTorch export and checks that
// the written file declares the source's inputs and outputs exactly, and,
// run on attnrun's layers on the source's test data, gives PyTorch's
// outputs at 1e-5 relative / 1e-6 absolute.
func TestImportPyTorchFixtures(t *testing.T) {
	dirs, err := filepath.Glob(onnxFixtures + "/*_opset*")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(dirs), 90)
	more, err := filepath.Glob(liftFixtures + "/*/model.onnx")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(more), 19)
	for _, m := range more {
		dirs = append(dirs, filepath.Dir(m))
	}
	tmp := t.TempDir()
	for _, dir := range dirs {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(tmp, name+".onnx")
			yaml := filepath.Join(tmp, name+".yaml")
			status, stdout, stderr := attnrun("import", filepath.Join(dir, "model.onnx"), "-o", out, "--config-out", yaml)
			require.Equal(t, 0, status, stderr)
			assert.True(t, strings.Contains(stdout, "graph tensor  ") || strings.Contains(stdout, "no parameters"), stdout)
			assert.Contains(t, stdout, "checked against the graph")
			config, err := os.ReadFile(yaml)
			require.NoError(t, err)
			header, body, _ := strings.Cut(string(config), "\n")
			assert.Equal(t, "# lifted from "+filepath.Join(dir, "model.onnx")+" by attnrun import; its weights: --weights "+out, header)
			assert.Contains(t, stdout, body)
			_, err = models.Parse(config, yaml)
			require.NoError(t, err)
			assertSameInterface(t, filepath.Join(dir, "model.onnx"), out)

			status, stdout, stderr = attnrun("check", out, "--data", dir)
			require.Equal(t, 0, status, stdout+stderr)
			assert.Contains(t, stdout, "run on attnrun layers")
			assert.Contains(t, stdout, " 0 failed")
		})
	}
}

func TestImportPrintsTheMappingTable(t *testing.T) {
	dir := onnxFixtures + "/torch_mha_causal_self_opset17_static"
	out := filepath.Join(t.TempDir(), "mha.onnx")
	status, stdout, stderr := attnrun("import", dir+"/model.onnx", "-o", out)
	require.Equal(t, 0, status, stderr)
	for _, want := range []string{
		"type: attention.multihead, d_in: 8, d_out: 8, context_length: 6, num_heads: 2, qkv_bias: true, out_bias: true, causal: true",
		"onnx::MatMul_107 mha.W_key.weight transposed, split rows 8:16",
		"mha.in_proj_bias mha.W_value.bias split 16:24",
		"mha.out_proj.weight mha.out_proj.weight -",
		`output 1 "weights": attention weights of mha, averaged over heads`,
	} {
		assert.Contains(t, collapseSpaces(stdout), want)
	}
	// The file keeps both outputs of the source: an export computes the
	// model's output only, so it keeps the source's nodes.
	assert.Contains(t, stdout, "note: the model cannot be exported as attnrun's own graph (the graph also returns the attention weights")
	// run prints both outputs, on the layers and on the file's graph.
	for _, executor := range []string{"", "--executor"} {
		args := []string{"run", out, "--input", dir + "/test_data_set_0/input_0.pb"}
		if executor != "" {
			args = append(args, executor)
		}
		status, stdout, stderr = attnrun(args...)
		require.Equal(t, 0, status, stderr)
		assert.True(t, strings.HasPrefix(stdout, "y:\ntensor([[["), stdout)
		assert.Contains(t, stdout, "weights:\ntensor(")
	}
}

// assertSameInterface checks that the file at got declares the inputs
// (those no initializer backs) and outputs of the file at want, in order,
// down to every field of their value infos: names, element types, fixed
// and symbolic dimensions.
func assertSameInterface(t *testing.T, want, got string) {
	t.Helper()
	a, err := onnxio.ReadModel(want)
	require.NoError(t, err)
	b, err := onnxio.ReadModel(got)
	require.NoError(t, err)
	wantIn, wantOut := declaredInterface(a)
	gotIn, gotOut := declaredInterface(b)
	assert.Equal(t, infoSummary(wantIn), infoSummary(gotIn), "inputs")
	assert.Equal(t, infoSummary(wantOut), infoSummary(gotOut), "outputs")
	for i := range min(len(wantIn), len(gotIn)) {
		assert.True(t, proto.Equal(wantIn[i], gotIn[i]), "input %d: %v, want %v", i, gotIn[i], wantIn[i])
	}
	for i := range min(len(wantOut), len(gotOut)) {
		assert.True(t, proto.Equal(wantOut[i], gotOut[i]), "output %d: %v, want %v", i, gotOut[i], wantOut[i])
	}
}

// infoSummary prints value infos as "x FLOAT[batch seq 8]".
func infoSummary(infos []*onnxpb.ValueInfoProto) []string {
	out := make([]string, len(infos))
	for i, vi := range infos {
		out[i] = vi.GetName() + " " + onnxio.ElemType(vi).String() + onnxio.FormatDims(onnxio.Dims(vi))
	}
	return out
}

// declaredInterface returns a graph's inputs no initializer backs, and
// its outputs.
func declaredInterface(m *onnxpb.ModelProto) (inputs, outputs []*onnxpb.ValueInfoProto) {
	inits := map[string]bool{}
	for _, t := range m.GetGraph().GetInitializer() {
		inits[t.GetName()] = true
	}
	for _, vi := range m.GetGraph().GetInput() {
		if !inits[vi.GetName()] {
			inputs = append(inputs, vi)
		}
	}
	return inputs, m.GetGraph().GetOutput()
}

// withRelu writes a fixture with a Relu after its output, a node no
// attnrun layer computes.
func withRelu(t *testing.T, name string) string {
	t.Helper()
	m, err := onnxio.ReadModel(filepath.Join(onnxFixtures, name, "model.onnx"))
	require.NoError(t, err)
	g := m.GetGraph()
	for _, n := range g.GetNode() {
		for i, out := range n.Output {
			if out == "y" {
				n.Output[i] = "before_relu"
			}
		}
	}
	g.Node = append(g.Node, &onnxpb.NodeProto{Name: proto.String("/relu"), OpType: proto.String("Relu"), Input: []string{"before_relu"}, Output: []string{"y"}})
	path := filepath.Join(t.TempDir(), "relu.onnx")
	require.NoError(t, onnxio.WriteModel(path, m))
	return path
}

func TestImportNamesWhatItCannotLift(t *testing.T) {
	in := withRelu(t, "causal_attention_opset17_dynamic")
	out := filepath.Join(t.TempDir(), "out.onnx")
	status, stdout, stderr := attnrun("import", in, "-o", out)
	assert.Equal(t, 1, status)
	assert.Contains(t, stdout, "op Relu is not part of any attnrun layer\n      /relu (Relu)")
	assert.Contains(t, stderr, "1 node(s) cannot be lifted (op types Relu); --partial keeps them as ONNX subgraphs")
	assert.NoFileExists(t, out)

	status, stdout, stderr = attnrun("import", in, "-o", out, "--partial")
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, stdout, "type: onnx.subgraph")
	assert.Contains(t, stdout, "kept as ONNX subgraphs")
	status, _, stderr = attnrun("run", out, "--input", onnxFixtures+"/causal_attention_opset17_dynamic/test_data_set_1/input_0.pb")
	require.Equal(t, 0, status, stderr)

	status, stdout, _ = attnrun("inspect", in)
	require.Equal(t, 0, status)
	assert.Contains(t, stdout, "attnrun layers\n  cannot be lifted completely")
}

func TestInspectShowsTheLayers(t *testing.T) {
	dir := onnxFixtures + "/positional_self_attention_opset14_dynamic"
	status, stdout, stderr := attnrun("inspect", dir+"/model.onnx")
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, stdout, "attnrun layers\n  lifts to model \"lifted\"")
	assert.Contains(t, stdout, "pos   position.learned  reads x")
	assert.Contains(t, stdout, "attn  attention.self    reads pos")

	out := filepath.Join(t.TempDir(), "pos.onnx")
	status, _, stderr = attnrun("import", dir+"/model.onnx", "-o", out)
	require.Equal(t, 0, status, stderr)
	status, stdout, _ = attnrun("inspect", out)
	require.Equal(t, 0, status)
	assert.Contains(t, stdout, "written by attnrun: model \"lifted\", described from its metadata")
}

func TestLiftedFileWithUnknownVersion(t *testing.T) {
	dir := onnxFixtures + "/causal_attention_opset17_static"
	out := filepath.Join(t.TempDir(), "v2.onnx")
	status, _, stderr := attnrun("import", dir+"/model.onnx", "-o", out)
	require.Equal(t, 0, status, stderr)
	m, err := onnxio.ReadModel(out)
	require.NoError(t, err)
	onnxio.SetMetadata(m, export.MetadataVersion, "7")
	require.NoError(t, onnxio.WriteModel(out, m))

	status, _, stderr = attnrun("run", out, "--input", dir+"/test_data_set_0/input_0.pb")
	assert.Equal(t, 1, status)
	assert.Contains(t, stderr, `attnrun format version "7" is not supported`)
	assert.Contains(t, stderr, "--executor")
	status, _, stderr = attnrun("check", out, "--data", dir, "--executor")
	assert.Equal(t, 0, status, stderr)
}

func TestImportUsage(t *testing.T) {
	in := onnxFixtures + "/causal_attention_opset17_static/model.onnx"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"import", in}, "import needs -o OUT.onnx"},
		{[]string{"import", in, "-o", "out.yaml"}, "must end in .onnx"},
		{[]string{"import", in, "-o", "out.onnx", "--opset", "9"}, "--opset 9"},
		{[]string{"import"}, "import needs one argument, an ONNX file"},
	}
	for _, c := range cases {
		status, _, stderr := attnrun(c.args...)
		assert.Equal(t, 2, status, c.args)
		assert.Contains(t, stderr, c.want)
	}
	status, _, stderr := attnrun("import", filepath.Join(t.TempDir(), "none.onnx"), "-o", filepath.Join(t.TempDir(), "x.onnx"))
	assert.Equal(t, 1, status)
	assert.Contains(t, stderr, "none.onnx")
}

// collapseSpaces turns runs of spaces (tabwriter padding) into one.
func collapseSpaces(s string) string {
	for strings.Contains(s, "  ") {
		s = strings.ReplaceAll(s, "  ", " ")
	}
	return s
}
