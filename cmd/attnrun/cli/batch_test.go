package cli

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	attnrunlib "github.com/attnrun/attnrun"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/tensorio"
)

// randomInput is a float32 tensor of the given shape drawn from seed.
func randomInput(seed uint64, shape ...int) *tensor.Dense {
	rng := rand.New(rand.NewPCG(seed, 1))
	n := 1
	for _, d := range shape {
		n *= d
	}
	data := make([]float32, n)
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// presetForward runs a preset's model on x, as the reference for a batch.
func presetForward(t *testing.T, name string, x *tensor.Dense) *tensor.Dense {
	t.Helper()
	p, err := models.LookupPreset(name)
	require.NoError(t, err)
	m, err := p.Model()
	require.NoError(t, err)
	out, err := m.Forward(nil, x)
	require.NoError(t, err)
	return out
}

// assertClose compares two float32 tensors at the suite's tolerance.
func assertClose(t *testing.T, want, got *tensor.Dense, msg string) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape(), msg)
	c, err := attnrunlib.Compare(got, want, 1e-5, 1e-6)
	require.NoError(t, err, msg)
	assert.True(t, c.OK(), "%s: %v", msg, c)
}

// summaryLine is the line a batch or check ends with on stderr.
var summaryLine = regexp.MustCompile(`(?m)^(\d+) (inputs?|data sets?) in [0-9.]+(µs|ms|s|m[0-9.]+s), (\d+) failed$`)

func TestRunBatchDirectory(t *testing.T) {
	in, out := t.TempDir(), filepath.Join(t.TempDir(), "made", "by", "run")
	inputs := map[string]*tensor.Dense{
		"x0": randomInput(1, 2, 6, 3),
		"x1": randomInput(2, 1, 4, 3),
		"x2": randomInput(3, 5, 3), // unbatched
	}
	for name, x := range inputs {
		require.NoError(t, tensorio.WriteNPYFile(filepath.Join(in, name+".npy"), x))
	}
	require.NoError(t, os.WriteFile(filepath.Join(in, "notes.txt"), []byte("not an input"), 0o644))

	status, stdout, stderr := attnrun("run", "seed-mha-wrapper", "--input", in, "--output", out)
	require.Equal(t, 0, status, stderr)
	assert.Empty(t, stdout)
	assert.NotContains(t, stderr, "\r", "no bar when stderr is not a terminal")
	m := summaryLine.FindStringSubmatch(stderr)
	require.NotNil(t, m, stderr)
	assert.Equal(t, []string{"3", "inputs", "0"}, []string{m[1], m[2], m[4]})
	for name, x := range inputs {
		got, err := tensorio.ReadNPYFile(filepath.Join(out, name+".npy"))
		require.NoError(t, err)
		assertClose(t, presetForward(t, "seed-mha-wrapper", x), got, name)
	}

	// A bad input fails alone; the others still run, and the status says so.
	require.NoError(t, tensorio.WriteNPYFile(filepath.Join(in, "bad.npy"), randomInput(4, 2, 6, 5)))
	status, stdout, stderr = attnrun("run", "seed-mha-wrapper", "--input", in)
	assert.Equal(t, 1, status)
	assert.Contains(t, stderr, `bad.npy: layer "attn" (attention.multihead_wrapper): d_in mismatch: input last dim 5`)
	m = summaryLine.FindStringSubmatch(stderr)
	require.NotNil(t, m, stderr)
	assert.Equal(t, []string{"4", "1"}, []string{m[1], m[4]})
	assert.Contains(t, stderr, "attnrun: 1 of 4 inputs failed")
	// Printed in name order, each under its name.
	assert.Regexp(t, `(?s)^x0\.npy:\ntensor\(\[\[\[.*\]\]\]\)\nx1\.npy:\ntensor\(\[\[\[.*\]\]\]\)\nx2\.npy:\ntensor\(\[\[[^\[]`, stdout)
}

func TestRunBatchNPZ(t *testing.T) {
	dir := t.TempDir()
	names := []string{"second", "first"}
	xs := []*tensor.Dense{randomInput(5, 2, 6, 3), randomInput(6, 3, 3)}
	in, out := filepath.Join(dir, "in.npz"), filepath.Join(dir, "out.npz")
	require.NoError(t, tensorio.WriteNPZ(in, names, xs))

	status, _, stderr := attnrun("run", "seed-mha-wrapper", "--input", in, "--output", out)
	require.Equal(t, 0, status, stderr)
	assert.Contains(t, stderr, "2 inputs in ")
	gotNames, got, err := tensorio.ReadNPZ(out)
	require.NoError(t, err)
	assert.Equal(t, names, gotNames, "the archive's order and keys")
	for i, x := range xs {
		assertClose(t, presetForward(t, "seed-mha-wrapper", x), got[i], names[i])
	}
}

func TestRunBatchONNX(t *testing.T) {
	src := onnxFixtures + "/causal_attention_opset17_dynamic"
	in, out := t.TempDir(), t.TempDir()
	for i, name := range []string{"a.pb", "b.pb"} {
		data, err := os.ReadFile(filepath.Join(src, "test_data_set_"+string(rune('0'+i)), "input_0.pb"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(in, name), data, 0o644))
	}
	status, _, stderr := attnrun("run", src+"/model.onnx", "--input", in, "--output", out)
	require.Equal(t, 0, status, stderr)
	for i, name := range []string{"a", "b"} {
		got, err := tensorio.ReadNPYFile(filepath.Join(out, name+".npy"))
		require.NoError(t, err)
		tp, err := onnxio.ReadTensorFile(filepath.Join(src, "test_data_set_"+string(rune('0'+i)), "output_0.pb"))
		require.NoError(t, err)
		want, err := onnxio.TensorToDense(tp)
		require.NoError(t, err)
		assertClose(t, want, got, name)
	}
}

func TestRunBatchErrors(t *testing.T) {
	dir := t.TempDir()
	in, empty, clash := filepath.Join(dir, "in"), filepath.Join(dir, "empty"), filepath.Join(dir, "clash")
	for _, d := range []string{in, empty, clash} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, tensorio.WriteNPYFile(filepath.Join(in, "x.npy"), randomInput(1, 6, 3)))
	require.NoError(t, tensorio.WriteNPYFile(filepath.Join(clash, "x.npy"), randomInput(1, 6, 3)))
	require.NoError(t, os.WriteFile(filepath.Join(clash, "x.pb"), nil, 0o644))
	cross := writeFile(t, dir, "cross.yaml", `name: cross
inputs: [x, memory]
layers:
  - {name: attn, type: attention.sdpa, d: 4, num_heads: 2, inputs: [x, memory]}
`)
	cases := []failure{
		{"output is the input", []string{"run", "seed-mha-wrapper", "--input", in, "--output", in}, 2, "is the input directory"},
		{"empty directory", []string{"run", "seed-mha-wrapper", "--input", empty}, 1, "no .npy or .pb files to run"},
		{"same stem", []string{"run", "seed-mha-wrapper", "--input", clash}, 1, "x.npy and x.pb would both write the output x.npy"},
		{"two outputs", []string{"run", "seed-mha-wrapper", "--input", in, "-o", "a", "-o", "b"}, 2, "takes one --output"},
		{"two model inputs", []string{"run", cross, "--input", in}, 2, `runs a model of one input; model "cross" takes 2 (x, memory)`},
		{"missing archive", []string{"run", "seed-mha-wrapper", "--input", filepath.Join(dir, "none.npz")}, 1, "none.npz"},
	}
	checkFailures(t, cases)
}

// copyDataSets copies test_data_set_N folders of a fixture into dir.
func copyDataSets(t *testing.T, src, dir string, sets ...string) {
	t.Helper()
	for _, set := range sets {
		entries, err := os.ReadDir(filepath.Join(src, set))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, set), 0o755))
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(src, set, e.Name()))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, set, e.Name()), data, 0o644))
		}
	}
}

func TestCheckDataSetsSummary(t *testing.T) {
	src := onnxFixtures + "/causal_attention_opset17_dynamic"
	status, stdout, stderr := attnrun("check", src+"/model.onnx")
	require.Equal(t, 0, status, stdout+stderr)
	assert.Contains(t, stdout, "2 passed, 0 failed")
	assert.NotContains(t, stderr, "\r")
	m := summaryLine.FindStringSubmatch(stderr)
	require.NotNil(t, m, stderr)
	assert.Equal(t, []string{"2", "data sets", "0"}, []string{m[1], m[2], m[4]})

	// A set that cannot be read fails alone: the next set is still checked.
	dir := t.TempDir()
	copyDataSets(t, src, dir, "test_data_set_0", "test_data_set_1")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "test_data_set_0", "input_0.pb"), []byte("\xff\xff junk"), 0o644))
	status, stdout, stderr = attnrun("check", src+"/model.onnx", "--data", dir)
	assert.Equal(t, 1, status)
	assert.Regexp(t, `test_data_set_0  FAIL  .*input_0\.pb`, stdout)
	assert.Regexp(t, `test_data_set_1  output 0 "y"  ok`, stdout)
	assert.Contains(t, stdout, "1 passed, 1 failed")
	m = summaryLine.FindStringSubmatch(stderr)
	require.NotNil(t, m, stderr)
	assert.Equal(t, []string{"2", "data sets", "1"}, []string{m[1], m[2], m[4]})
}

// incrementalConfig is a decoder whose every layer steps: sinusoidal
// positions, causal GQA attention with RoPE and a sliding window, a
// residual, a norm and an MLP.
const incrementalConfig = `name: decoder
layers:
  - {name: pos, type: position.sinusoidal, d: 8}
  - {name: attn, type: attention.sdpa, d: 8, num_heads: 4, num_kv_heads: 2, causal: true, rope: half, window: 3}
  - {name: res, type: nn.add, inputs: [pos, attn]}
  - {name: norm, type: norm.layer, d: 8}
  - {name: mlp, type: nn.mlp, d: 8, d_hidden: 16}
`

func TestRunIncremental(t *testing.T) {
	dir := t.TempDir()
	config := writeFile(t, dir, "decoder.yaml", incrementalConfig)
	x := filepath.Join(dir, "x.npy")
	require.NoError(t, tensorio.WriteNPYFile(x, randomInput(7, 2, 7, 8)))
	targets := []struct {
		name string
		args []string
	}{
		{"preset", []string{"seed-mha-wrapper"}},
		{"sdpa config", []string{config, "--seed", "3", "--input", x}},
	}
	for _, target := range targets {
		t.Run(target.name, func(t *testing.T) {
			run := func(extra ...string) *tensor.Dense {
				out := filepath.Join(t.TempDir(), "y.npy")
				args := append(append([]string{"run"}, target.args...), append(extra, "-o", out)...)
				status, _, stderr := attnrun(args...)
				require.Equal(t, 0, status, stderr)
				y, err := tensorio.ReadNPYFile(out)
				require.NoError(t, err)
				return y
			}
			full := run()
			assertClose(t, full, run("--incremental"), "token by token")
			assertClose(t, full, run("--incremental=3"), "3 tokens per step")
		})
	}
	// A preset that shows attention weights (T, T) writes its output (T, d) instead.
	out := filepath.Join(dir, "causal.npy")
	status, _, stderr := attnrun("run", "seed-bishop-causal", "--incremental", "-o", out)
	require.Equal(t, 0, status, stderr)
	got, err := tensorio.ReadNPYFile(out)
	require.NoError(t, err)
	p, err := models.LookupPreset("seed-bishop-causal")
	require.NoError(t, err)
	input, err := p.Input()
	require.NoError(t, err)
	assertClose(t, presetForward(t, "seed-bishop-causal", input), got, "seed-bishop-causal output")
}

func TestRunIncrementalErrors(t *testing.T) {
	dir := t.TempDir()
	x := filepath.Join(dir, "x.npy")
	require.NoError(t, tensorio.WriteNPYFile(x, randomInput(1, 5, 4)))
	selfAttention := writeFile(t, dir, "self.yaml", "name: m\nlayers:\n  - {name: attn, type: attention.self, d_in: 4, d_out: 4, causal: true}\n")
	bidirectional := writeFile(t, dir, "sdpa.yaml", "name: m\nlayers:\n  - {name: attn, type: attention.sdpa, d: 4, num_heads: 2}\n")
	fixture := onnxFixtures + "/causal_attention_opset17_static/model.onnx"
	cases := []failure{
		{"layer without steps", []string{"run", selfAttention, "--input", x, "--incremental"}, 1,
			`--incremental: model "m": layer "attn" (attention.self) cannot run incrementally`},
		{"non-causal sdpa", []string{"run", bidirectional, "--input", x, "--incremental"}, 1,
			`layer "attn" (attention.sdpa) at token 0: non-causal self-attention cannot run incrementally`},
		{"zero tokens", []string{"run", "seed-mha-wrapper", "--incremental=0"}, 2, "must be positive"},
		{"with attention", []string{"run", "seed-mha-wrapper", "--incremental", "--attention", "attn"}, 2, "--incremental and --attention do not combine"},
		{"onnx", []string{"run", fixture, "--random-input", "2,6,8", "--incremental"}, 2, "not ONNX files on the executor"},
	}
	checkFailures(t, cases)
}

func TestChangedCommandsHaveExamples(t *testing.T) {
	for cmd, wants := range map[string][]string{
		"run":     {"Examples:", "--input inputs/ -o outputs/", "--incremental=4", "progress bar"},
		"check":   {"Examples:", "--data many_sets/", "progress bar"},
		"inspect": {"Examples:", "attnrun inspect seed-mha-wrapper", "--shape 4,512,768", "FLOPs"},
	} {
		status, out, _ := attnrun(cmd, "--help")
		require.Equal(t, 0, status)
		for _, want := range wants {
			assert.Contains(t, out, want, cmd)
		}
	}
}
