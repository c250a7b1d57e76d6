package models

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
	"github.com/attnrun/attnrun/tensorio"
)

// block is one transformer block of testdata/blocks: an attnrun config
// and the PyTorch module's weights, inputs and output
// (testdata/torch/modern.py).
type block struct {
	model    *Model
	inputs   []*tensor.Dense
	expected *tensor.Dense
}

// blockNames are the blocks under testdata/blocks.
var blockNames = []string{"gpt2", "llama", "decoder"}

// loadBlock builds a block's model from its YAML, loads the PyTorch
// weights strictly, and reads its inputs and expected output.
func loadBlock(t *testing.T, name string) block {
	t.Helper()
	dir := filepath.Join("testdata", "blocks", name)
	m, err := Load(filepath.Join(dir, "model.yaml"))
	require.NoError(t, err)
	require.NoError(t, m.LoadWeights(filepath.Join(dir, "weights.npz")))
	b := block{model: m}
	for k := range m.Config().Inputs {
		x, err := tensorio.ReadNPYFile(filepath.Join(dir, fmt.Sprintf("input_%d.npy", k)))
		require.NoError(t, err)
		b.inputs = append(b.inputs, x)
	}
	_, err = os.Stat(filepath.Join(dir, fmt.Sprintf("input_%d.npy", len(b.inputs))))
	require.True(t, os.IsNotExist(err), "%s has more input files than the model has inputs", name)
	b.expected, err = tensorio.ReadNPYFile(filepath.Join(dir, "expected.npy"))
	require.NoError(t, err)
	return b
}

// requireClose compares element by element, |got − want| ≤ atol + rtol·|want|,
// and fails on a NaN.
func requireClose(t *testing.T, want, got []float32, rtol, atol float64, msg string) {
	t.Helper()
	require.Equal(t, len(want), len(got), msg)
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if math.IsNaN(g) || math.Abs(w-g) > atol+rtol*math.Abs(w) {
			t.Fatalf("%s: element %d: got %.9g, want %.9g (rtol %g, atol %g)", msg, i, g, w, rtol, atol)
		}
	}
}

// TestBlocksMatchPyTorch checks the GPT-2-style, Llama-style and decoder
// (cross-attention) blocks assembled from YAML against the PyTorch modules
// with the same weights.
func TestBlocksMatchPyTorch(t *testing.T) {
	for _, name := range blockNames {
		t.Run(name, func(t *testing.T) {
			b := loadBlock(t, name)
			out, err := b.model.Forward(&registry.Run{}, b.inputs...)
			require.NoError(t, err)
			require.Equal(t, b.expected.Shape(), out.Shape())
			requireClose(t, b.expected.Data().([]float32), out.Data().([]float32), 1e-5, 1e-6, "output")
		})
	}
}
