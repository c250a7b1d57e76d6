package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckPyTorchFixtures runs `attnrun check` on every committed PyTorch
// export (testdata/torch/export_onnx.py): each seed class, nn.MultiheadAttention
// and a transformer block, opsets 13-17, static and dynamic axes, against
// PyTorch's outputs at 1e-5 relative / 1e-6 absolute.
func TestCheckPyTorchFixtures(t *testing.T) {
	models, err := filepath.Glob(onnxFixtures + "/*/model.onnx")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(models), 90)
	for _, m := range models {
		name := filepath.Base(filepath.Dir(m))
		t.Run(name, func(t *testing.T) {
			status, out, stderr := attnrun("check", m)
			require.Equal(t, 0, status, out+stderr)
			sets := 1
			if strings.Contains(name, "dynamic") {
				sets = 2
			}
			assert.Contains(t, out, " 0 failed")
			assert.GreaterOrEqual(t, strings.Count(out, "  ok  "), sets)
		})
	}
}

func TestRunONNX(t *testing.T) {
	dir := onnxFixtures + "/causal_attention_opset17_dynamic"
	out := filepath.Join(t.TempDir(), "y.npy")
	status, _, stderr := attnrun("run", dir+"/model.onnx", "--input", dir+"/test_data_set_1/input_0.pb", "--output", out)
	require.Equal(t, 0, status, stderr)
	status, stdout, stderr := attnrun("run", dir+"/model.onnx", "--input", dir+"/test_data_set_1/input_0.pb")
	require.Equal(t, 0, status, stderr)
	assert.True(t, strings.HasPrefix(stdout, "tensor([[["), stdout)

	status, stdout, _ = attnrun("inspect", dir+"/model.onnx")
	require.Equal(t, 0, status)
	for _, want := range []string{"producer    pytorch", "opsets      ai.onnx 17", "x  FLOAT  [batch seq", "Softmax", "initializers"} {
		assert.Contains(t, stdout, want)
	}
}

func TestCheckDetectsMismatch(t *testing.T) {
	src := onnxFixtures + "/causal_attention_opset13_static"
	dir := t.TempDir()
	for _, f := range []string{"model.onnx", "test_data_set_0/input_0.pb"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), data, 0o644))
	}
	// The input given as the expected output: the shapes differ, so the check fails.
	data, err := os.ReadFile(filepath.Join(src, "test_data_set_0/input_0.pb"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "test_data_set_0/output_0.pb"), data, 0o644))
	status, out, _ := attnrun("check", filepath.Join(dir, "model.onnx"))
	assert.Equal(t, 1, status)
	assert.Contains(t, out, "FAIL")
	assert.Contains(t, out, "0 passed, 1 failed")
}

func TestONNXErrors(t *testing.T) {
	dir := t.TempDir()
	junk := writeFile(t, dir, "junk.onnx", "definitely not protobuf \x00\xff")
	fixture := onnxFixtures + "/causal_attention_opset17_static/model.onnx"
	cases := []failure{
		{"junk file", []string{"inspect", junk}, 1, "junk.onnx"},
		{"missing file", []string{"run", filepath.Join(dir, "none.onnx")}, 1, "none.onnx"},
		{"missing input", []string{"run", fixture}, 2, "takes 1 input(s) (x float32"},
		{"no data sets", []string{"check", fixture, "--data", dir}, 1, "no test_data_set_N"},
	}
	checkFailures(t, cases)
}
