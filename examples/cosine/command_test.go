package cosine_test

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/tensorio"
)

// TestCommandLineONNX drives the custom binary's ONNX commands in-process:
// `export` writes a graph that attnrun's executor runs with PyTorch's
// numbers, `import` lifts PyTorch's own export into attention.cosine (and
// writes it back as an attnrun file that `run` runs), and `run` executes
// PyTorch's graph directly; the weights go out as a state dict and come
// back in; `plot` draws the layer's attention weights.
func TestCommandLineONNX(t *testing.T) {
	dir := t.TempDir()
	input := testdata("cosine_input.npy")
	expected := readNPY(t, "cosine_expected.npy")
	runs := func(t *testing.T, target string) {
		t.Helper()
		y := filepath.Join(dir, "y.npy")
		status, _, stderr := attnrun("run", target, "--input", input, "--output", y)
		require.Equal(t, 0, status, stderr)
		got, err := tensorio.ReadNPYFile(y)
		require.NoError(t, err)
		assertClose(t, expected, got, target)
	}

	t.Run("export", func(t *testing.T) {
		path := filepath.Join(dir, "cos.onnx")
		status, out, stderr := attnrun("export", testdata("cosine.yaml"), "--weights", testdata("cosine_weights.npz"), "-o", path)
		require.Equal(t, 0, status, stderr)
		assert.Contains(t, out, "wrote "+path)
		m, err := onnxio.ReadModel(path)
		require.NoError(t, err)
		assertClose(t, expected, runGraph(t, runnable(t, m), readNPY(t, "cosine_input.npy")), "the exported graph on the executor")
		runs(t, path)
	})
	t.Run("import", func(t *testing.T) {
		path, config := filepath.Join(dir, "lifted.onnx"), filepath.Join(dir, "lifted.yaml")
		status, out, stderr := attnrun("import", testdata("cosine_torch.onnx"), "-o", path, "--config-out", config)
		require.Equal(t, 0, status, stderr)
		assert.Contains(t, out, "type: attention.cosine")
		assert.Regexp(t, `onnx::MatMul_\d+ +attn\.W_query\.weight +transposed`, out)
		runs(t, path)
		written, err := os.ReadFile(config)
		require.NoError(t, err)
		assert.Contains(t, string(written), "{name: attn, type: attention.cosine, d_in: 4, d_out: 3, scale: 10, causal: true, qkv_bias: true}")
	})
	t.Run("run PyTorch's graph", func(t *testing.T) {
		runs(t, testdata("cosine_torch.onnx"))
	})
	t.Run("state dict", func(t *testing.T) {
		path := filepath.Join(dir, "w.safetensors")
		status, _, stderr := attnrun("export", testdata("cosine.yaml"), "--weights", testdata("cosine_weights.npz"), "--state-dict", path)
		require.Equal(t, 0, status, stderr)
		y := filepath.Join(dir, "y.npy")
		status, _, stderr = attnrun("run", testdata("cosine.yaml"), "--weights", path, "--input", input, "--output", y)
		require.Equal(t, 0, status, stderr)
		got, err := tensorio.ReadNPYFile(y)
		require.NoError(t, err)
		assertClose(t, expected, got, "run with the exported safetensors")
	})
	t.Run("plot", func(t *testing.T) {
		path := filepath.Join(dir, "attn.png")
		status, _, stderr := attnrun("plot", testdata("cosine.yaml"), "--weights", testdata("cosine_weights.npz"),
			"--input", input, "--labels", "a b c d e", "-o", path)
		require.Equal(t, 0, status, stderr)
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		img, err := png.Decode(f)
		require.NoError(t, err)
		assert.Greater(t, img.Bounds().Dx(), 100, "a picture of the attention weights")
	})
}
