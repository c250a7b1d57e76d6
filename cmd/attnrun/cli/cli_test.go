package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/registry"
	"github.com/attnrun/attnrun/tensorio"
)

// onnxFixtures holds PyTorch's ONNX exports with their test-data sets
// (testdata/torch/export_onnx.py).
const onnxFixtures = "../../../testdata/onnx"

// attnrun runs the command line in-process and returns its status and output.
func attnrun(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	status := Run(args, &out, &errOut)
	return status, out.String(), errOut.String()
}

// bareLayer is a layer with registry.Layer's methods only, as a custom
// layer may be: it cannot be exported to ONNX, count its FLOPs or step. It
// passes its input through.
type bareLayer struct{}

func (*bareLayer) Validate() error          { return nil }
func (*bareLayer) Params() []registry.Param { return nil }
func (*bareLayer) Forward(_ *registry.Run, in []*tensor.Dense) (*tensor.Dense, error) {
	return in[0], nil
}

func init() {
	registry.Register(registry.Info{ID: "clitest.bare", Summary: "a layer with registry.Layer's methods only",
		New: func() registry.Layer { return &bareLayer{} }})
}

// failure is a command line that must fail: its exit status, and a part of
// what it prints on stderr.
type failure struct {
	name   string
	args   []string
	status int
	want   string
}

// checkFailures runs each command line in a subtest of its name and checks
// its status and stderr.
func checkFailures(t *testing.T, cases []failure) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, stderr := attnrun(c.args...)
			assert.Equal(t, c.status, status, stderr)
			assert.Contains(t, stderr, c.want)
		})
	}
}

// writeFile writes text to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// TestRunPresets runs every preset through the command line, writes the
// result with --output and compares it with PyTorch's numbers.
func TestRunPresets(t *testing.T) {
	list, err := models.Presets()
	require.NoError(t, err)
	dir := t.TempDir()
	for _, p := range list {
		t.Run(p.Name, func(t *testing.T) {
			path := filepath.Join(dir, p.Name+".npy")
			status, _, stderr := attnrun("run", p.Name, "--output", path)
			require.Equal(t, 0, status, stderr)
			got, err := tensorio.ReadNPYFile(path)
			require.NoError(t, err)
			want, err := p.Expected()
			require.NoError(t, err)
			require.Equal(t, want.Shape(), got.Shape())
			for i, w := range want.Data().([]float32) {
				assert.InDelta(t, w, got.Data().([]float32)[i], 1e-6+1e-5*float64(abs32(w)))
			}
			// And the tensor the notebook prints, to its 4 decimals.
			printed, _, err := p.PrintedValues()
			require.NoError(t, err)
			for i, v := range printed {
				assert.InDelta(t, v, got.Data().([]float32)[i], 5e-5+1e-6)
			}
		})
	}
}

func TestRunPrintsLikePyTorch(t *testing.T) {
	status, out, stderr := attnrun("run", "seed-bag-of-words")
	require.Equal(t, 0, status, stderr)
	assert.Equal(t, "tensor([[2.0000, 7.0000],\n        [4.0000, 5.5000],\n        [4.6667, 5.3333]])\n", out)

	status, out, stderr = attnrun("run", "seed-masked-weights")
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, out, "tensor([[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],\n        [0.3986, 0.6014, 0.0000,")

	status, out, stderr = attnrun("run", "seed-self-attention-v2")
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, out, "tensor([[-0.0739,  0.0713],\n        [-0.0748,  0.0703],")
}

func TestRunConfigWithWeightsAndInput(t *testing.T) {
	dir := t.TempDir()
	p, err := models.LookupPreset("seed-mha-wrapper")
	require.NoError(t, err)
	m, err := p.Model()
	require.NoError(t, err)
	names, dict := m.StateDict()
	tensors := make([]*tensor.Dense, len(names))
	for i, n := range names {
		tensors[i] = dict[n]
	}
	weights := filepath.Join(dir, "w.npz")
	require.NoError(t, tensorio.WriteNPZ(weights, names, tensors))
	config := writeFile(t, dir, "model.yaml", string(m.Config().YAML))
	x, err := p.Input()
	require.NoError(t, err)
	input := filepath.Join(dir, "x.npy")
	require.NoError(t, tensorio.WriteNPYFile(input, x))

	status, out, stderr := attnrun("run", config, "--weights", weights, "--input", input)
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, out, "[[-0.4519,  0.2216,  0.4772,  0.1063],")

	// The same config with --seed 123 reproduces the notebook's weights.
	status, seeded, stderr := attnrun("run", config, "--seed", "123", "--input", input)
	require.Equal(t, 0, status, stderr)
	assert.Equal(t, out, seeded)
}

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	config := writeFile(t, dir, "m.yaml", "name: m\nlayers:\n  - {name: attn, type: attention.causal, d_in: 3, d_out: 2, context_length: 6}\n")
	ints := filepath.Join(dir, "ints.npy")
	require.NoError(t, tensorio.WriteNPYFile(ints, tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]int64{1, 2, 3, 4, 5, 6}))))
	wide := filepath.Join(dir, "wide.npy")
	require.NoError(t, tensorio.WriteNPYFile(wide, tensor.New(tensor.WithShape(2, 4), tensor.WithBacking(make([]float32, 8)))))
	cases := []failure{
		{"unknown preset", []string{"run", "seed-nope"}, 1, `unknown preset "seed-nope"`},
		{"no input for config", []string{"run", config}, 2, "needs --input"},
		{"malformed npy", []string{"run", config, "--input", writeFile(t, dir, "bad.npy", "\x93NUMPY garbage")}, 1, "bad.npy"},
		{"non-float npy", []string{"run", config, "--input", ints}, 1, "ints.npy"},
		{"d_in mismatch", []string{"run", config, "--input", wide}, 1, "d_in"},
		{"unknown attention layer", []string{"run", "seed-simple", "--attention", "nope"}, 1, `no such layer`},
		{"weights of another model", []string{"run", "seed-simple", "--weights", writeFile(t, dir, "w.txt", "")}, 2, "--weights " + filepath.Join(dir, "w.txt") + ": this is an empty file"},
		{"missing config file", []string{"run", filepath.Join(dir, "none.yaml")}, 1, "none.yaml"},
		{"bad flag", []string{"run", "seed-simple", "--nope"}, 2, "unknown flag"},
	}
	checkFailures(t, cases)
}

func TestListCommands(t *testing.T) {
	status, out, _ := attnrun("layers")
	require.Equal(t, 0, status)
	for _, id := range []string{"attention.simple", "attention.self", "attention.causal", "attention.multihead_wrapper",
		"attention.multihead", "attention.average", "position.learned", "nn.linear", "nn.dropout"} {
		assert.Contains(t, out, id)
	}
	status, out, _ = attnrun("presets")
	require.Equal(t, 0, status)
	assert.Contains(t, out, "seed-bishop-positional")
	for _, cmd := range []string{"run", "layers", "presets"} {
		status, out, _ = attnrun(cmd, "--help")
		require.Equal(t, 0, status)
		assert.Contains(t, out, "Examples:", cmd)
	}
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}
