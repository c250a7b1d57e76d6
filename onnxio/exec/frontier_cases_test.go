package exec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
)

// frontierCases is where testdata/torch/frontier_cases.py wrote models of
// LinearAttention, FlexAttention and SwiGLU with PyTorch's outputs.
const frontierCases = "testdata/frontier"

// TestFrontierCases checks the executor against PyTorch on every committed
// case, at rtol 1e-5 and atol 1e-6 for float32 (the cases' references are
// float64) and rtol 1e-12 for float64.
func TestFrontierCases(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(frontierCases, "manifest.json"))
	require.NoError(t, err, "testdata/torch/frontier_cases.py writes the cases")
	var manifest struct {
		Cases []struct {
			Name   string   `json:"name"`
			Ops    []string `json:"ops"`
			Covers string   `json:"covers"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(data, &manifest))
	covered := map[string]bool{}
	for _, c := range manifest.Cases {
		for _, op := range c.Ops {
			covered[op] = true
		}
		t.Run(c.Name, func(t *testing.T) {
			m, err := onnxio.ReadModel(filepath.Join(frontierCases, c.Name, "model.onnx"))
			require.NoError(t, err)
			assert.NoError(t, runNodeTest(m, filepath.Join(frontierCases, c.Name), tolerance{rtol: 1e-5, atol: 1e-6}), c.Covers)
		})
	}
	assert.Equal(t, map[string]bool{"LinearAttention": true, "SwiGLU": true, "ai.onnx.preview.FlexAttention": true}, covered)
}
