package exec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/onnxio"
)

// nonFiniteCases is where testdata/nonfinite.py wrote models whose inputs
// hold NaN, +Inf and −Inf, with ONNX Runtime 1.30's outputs
// (testdata/ort/run_cases.mjs).
const nonFiniteCases = "testdata/nonfinite"

// TestNonFiniteAgainstORT runs every case on every instruction set the
// kernels have here: the executor's outputs must have ONNX Runtime's NaN
// and infinities exactly and its finite values at rtol 1e-5, atol 1e-6.
// For the fused attention chain it also checks which path ran: the fused
// kernel, except for an Add mask with a non-finite Q or K, whose hidden
// scores only the original nodes compute.
func TestNonFiniteAgainstORT(t *testing.T) {
	entries, err := os.ReadDir(nonFiniteCases)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	require.GreaterOrEqual(t, len(names), 40)
	for _, isa := range kernels.ISAs() {
		t.Run(isa, func(t *testing.T) {
			restore, err := kernels.UseISA(isa)
			require.NoError(t, err)
			defer restore()
			for _, name := range names {
				t.Run(name, func(t *testing.T) { checkNonFiniteCase(t, name) })
			}
		})
	}
}

// checkNonFiniteCase runs one case and compares every output.
func checkNonFiniteCase(t *testing.T, name string) {
	folder := filepath.Join(nonFiniteCases, name)
	m, err := onnxio.ReadModel(filepath.Join(folder, "model.onnx"))
	require.NoError(t, err)
	g, err := New(m)
	require.NoError(t, err)
	ds, err := onnxio.ReadDataSet(filepath.Join(folder, "test_data_set_0"))
	require.NoError(t, err)
	require.Len(t, ds.Outputs, len(g.outputs), "ONNX Runtime's outputs (run_cases.mjs writes them)")
	got, err := runDataSet(g, ds)
	require.NoError(t, err)
	for k, tp := range ds.Outputs {
		want, err := tensorValue(tp)
		require.NoError(t, err)
		assert.NoError(t, compareValues(got[k], want, tolerance{rtol: 1e-5, atol: 1e-6}), "output %q", g.outputs[k].Name)
	}
	if strings.HasPrefix(name, "chain") {
		nodes, fused, fallback := g.attentionRuns()
		require.Equal(t, 1, nodes, "the chain is fused")
		wantFallback := strings.Contains(name, "_add_") && !strings.HasSuffix(name, "_V")
		assert.Equal(t, wantFallback, fallback > 0, "ran the original nodes (fused %d, fallback %d)", fused, fallback)
	}
}
