package cli

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// exportTestConfig is a model with a residual around multi-head attention:
// parameters of every kind, a causal mask and a fixed input width of 4.
const exportTestConfig = `name: block
layers:
  - {name: pos, type: position.learned, context_length: 6, d: 4}
  - {name: attn, type: attention.multihead, d_in: 4, d_out: 4, context_length: 6, num_heads: 2, qkv_bias: true}
  - {name: res, type: nn.add, inputs: [pos, attn]}
`

func TestExportPresetRunsLikeTheModel(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"seed-mha-wrapper", "seed-simple", "seed-masked-weights"} {
		path := filepath.Join(dir, name+".onnx")
		status, out, stderr := attnrun("export", name, "-o", path, "--opset", "13")
		require.Equal(t, 0, status, stderr)
		assert.Contains(t, out, "wrote "+path+": model \""+name+"\", opset 13")

		pb, err := onnxio.ReadModel(path)
		require.NoError(t, err)
		config, ok := onnxio.Metadata(pb, "attnrun.config")
		require.True(t, ok)
		version, _ := onnxio.Metadata(pb, "attnrun.version")
		assert.Equal(t, "1", version)
		assert.Equal(t, int64(13), onnxio.OpsetVersion(pb, ""))

		p, err := models.LookupPreset(name)
		require.NoError(t, err)
		m, err := p.Model()
		require.NoError(t, err)
		assert.Equal(t, string(m.Config().YAML), config)
		x, err := p.Input()
		require.NoError(t, err)
		// The preset's width is fixed even for a model without parameters.
		assert.Equal(t, x.Shape()[x.Dims()-1], int(onnxio.Dims(pb.GetGraph().GetInput()[0])[2].Value), name)
		want, err := m.Forward(nil, x)
		require.NoError(t, err)
		assertExportRuns(t, pb, x, want)
	}
}

func TestExportConfigWithSeedAndWeights(t *testing.T) {
	dir := t.TempDir()
	config := writeFile(t, dir, "block.yaml", exportTestConfig)
	m, err := models.Load(config)
	require.NoError(t, err)
	require.NoError(t, m.Init(3))
	x := exportTestInput(2, 5, 4)
	want, err := m.Forward(nil, x)
	require.NoError(t, err)

	seeded := filepath.Join(dir, "seeded.onnx")
	status, _, stderr := attnrun("export", config, "--seed", "3", "-o", seeded)
	require.Equal(t, 0, status, stderr)
	pb, err := onnxio.ReadModel(seeded)
	require.NoError(t, err)
	assert.Equal(t, int64(17), onnxio.OpsetVersion(pb, ""), "default opset")
	assertExportRuns(t, pb, x, want)

	// The state dict of that model, given back with --weights, exports the
	// same file byte for byte.
	weights := filepath.Join(dir, "w.safetensors")
	status, _, stderr = attnrun("export", config, "--seed", "3", "--state-dict", weights)
	require.Equal(t, 0, status, stderr)
	fromWeights := filepath.Join(dir, "weights.onnx")
	status, _, stderr = attnrun("export", config, "--weights", weights, "-o", fromWeights)
	require.Equal(t, 0, status, stderr)
	a, err := os.ReadFile(seeded)
	require.NoError(t, err)
	b, err := os.ReadFile(fromWeights)
	require.NoError(t, err)
	assert.Equal(t, a, b)
}

// A state dict written by export loads back into the model, value for
// value, in both formats; -o and --state-dict may be combined.
func TestExportStateDictRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, ext := range []string{".npz", ".safetensors"} {
		for _, target := range []string{"seed-bishop-multihead-concat", "seed-randn-weights"} {
			path := filepath.Join(dir, target+ext)
			onnxPath := filepath.Join(dir, target+ext+".onnx")
			status, out, stderr := attnrun("export", target, "--state-dict", path, "-o", onnxPath)
			require.Equal(t, 0, status, stderr)
			assert.Contains(t, out, "wrote "+path)
			assert.FileExists(t, onnxPath)

			p, err := models.LookupPreset(target)
			require.NoError(t, err)
			want, err := p.Model()
			require.NoError(t, err)
			cfg, err := models.ParseConfig(want.Config().YAML, target)
			require.NoError(t, err)
			got, err := models.New(cfg)
			require.NoError(t, err)
			require.NoError(t, got.LoadWeights(path))
			wantNames, wantDict := want.StateDict()
			gotNames, gotDict := got.StateDict()
			require.Equal(t, wantNames, gotNames)
			for _, n := range wantNames {
				assert.Equal(t, wantDict[n].Shape(), gotDict[n].Shape(), n)
				assert.Equal(t, wantDict[n].Data(), gotDict[n].Data(), n)
			}
		}
	}
}

func TestExportErrors(t *testing.T) {
	dir := t.TempDir()
	plain := writeFile(t, dir, "plain.yaml", "name: m\nlayers:\n  - {name: lin, type: nn.linear, d_in: 2, d_out: 2}\n  - {name: odd, type: clitest.bare}\n")
	out := filepath.Join(dir, "out.onnx")
	cases := []failure{
		{"no output", []string{"export", "seed-simple"}, 2, "export needs -o OUT.onnx or --state-dict"},
		{"opset too old", []string{"export", "seed-simple", "-o", out, "--opset", "12"}, 2, "--opset 12: attnrun exports opsets 13 to 27"},
		{"opset too new", []string{"export", "seed-simple", "-o", out, "--opset", "28"}, 2, "--opset 28"},
		{"opset without -o", []string{"export", "seed-simple", "--state-dict", filepath.Join(dir, "w.npz"), "--opset", "13"}, 2, "--opset applies to the ONNX file"},
		{"not .onnx", []string{"export", "seed-simple", "-o", filepath.Join(dir, "m.pb")}, 2, "must end in .onnx"},
		{"unknown state dict format", []string{"export", "seed-simple", "--state-dict", filepath.Join(dir, "w.pt")}, 2, "unknown format (want .npz or .safetensors)"},
		{"two models", []string{"export", "seed-simple", "seed-bag-of-words", "-o", out}, 2, "takes one argument"},
		{"unknown preset", []string{"export", "seed-nope", "-o", out}, 1, `unknown preset "seed-nope"`},
		{"unexportable layer", []string{"export", plain, "-o", out}, 1,
			`layer "odd" (clitest.bare): cannot be exported to ONNX: *cli.bareLayer does not implement registry.Exporter`},
		{"missing directory", []string{"export", "seed-simple", "-o", filepath.Join(dir, "none", "m.onnx")}, 1, "none"},
	}
	checkFailures(t, cases)
	// Nothing was written, not even a temporary file.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.Contains(t, []string{"plain.yaml"}, e.Name(), "left behind")
	}
}

func TestExportHelp(t *testing.T) {
	status, out, _ := attnrun("export", "--help")
	require.Equal(t, 0, status)
	for _, want := range []string{"Examples:", "attnrun export seed-mha-wrapper -o mha.onnx", "--state-dict", "--opset", "(1, T, d)"} {
		assert.Contains(t, out, want)
	}
}

// assertExportRuns runs an export on the executor, a (T, d) input fed as
// (1, T, d), and compares with want.
func assertExportRuns(t *testing.T, pb *onnxpb.ModelProto, x, want *tensor.Dense) {
	t.Helper()
	g, err := exec.New(pb)
	require.NoError(t, err)
	if x.Dims() == 2 {
		x = tensor.New(tensor.WithShape(append([]int{1}, x.Shape()...)...), tensor.WithBacking(x.Data()))
	}
	outs, err := g.Run(map[string]*tensor.Dense{"x": x})
	require.NoError(t, err)
	got := outs["y"].Data().([]float32)
	w := want.Data().([]float32)
	require.Len(t, got, len(w))
	for i := range w {
		require.LessOrEqual(t, math.Abs(float64(got[i]-w[i])), 1e-6+1e-5*math.Abs(float64(w[i])), "element %d", i)
	}
}

func exportTestInput(b, n, d int) *tensor.Dense {
	data := make([]float32, b*n*d)
	for i := range data {
		data[i] = float32(math.Sin(float64(i)*0.7)) * 1.5
	}
	return tensor.New(tensor.WithShape(b, n, d), tensor.WithBacking(data))
}
