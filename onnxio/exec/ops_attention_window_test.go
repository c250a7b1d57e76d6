package exec

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
)

// windowCases is where testdata/attention25/generate.py wrote opset-25
// Attention models with sliding windows and the outputs of ONNX's
// reference implementation (onnx 1.23.2), computed in float64.
const windowCases = "testdata/attention25"

// TestAttentionWindowAgainstReference runs every committed opset-25 case
// and checks every output against ONNX's reference, at rtol 1e-5 and atol
// 1e-6.
func TestAttentionWindowAgainstReference(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(windowCases, "manifest.json"))
	require.NoError(t, err, "testdata/attention25/generate.py writes the cases")
	var manifest struct {
		Cases []struct{ Name, Covers string } `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(data, &manifest))
	require.NotEmpty(t, manifest.Cases)
	for _, c := range manifest.Cases {
		t.Run(c.Name, func(t *testing.T) {
			m, err := onnxio.ReadModel(filepath.Join(windowCases, c.Name, "model.onnx"))
			require.NoError(t, err)
			require.Equal(t, int64(25), onnxio.OpsetVersion(m, ""))
			assert.NoError(t, runNodeTest(m, filepath.Join(windowCases, c.Name), tolerance{rtol: 1e-5, atol: 1e-6}), c.Covers)
		})
	}
}

// TestAttentionWideWindowIsNoWindow checks that a window reaching every
// key gives exactly what no window gives, on the fused kernel and step by
// step, and that one key less changes the result (so that the comparison
// can fail).
func TestAttentionWideWindowIsNoWindow(t *testing.T) {
	for _, c := range []struct {
		attnCase
		wide, narrow []int64 // windows that hide nothing, and one key
	}{
		// Query i sees keys 0..i: left i ≤ 7 reaches key 0.
		{attnCase{name: "causal", b: 2, hq: 4, hkv: 2, sq: 8, skv: 8, d: 8, dv: 8, causal: true}, []int64{7, -1}, []int64{6, -1}},
		// Without is_causal, right 7 reaches the last key from query 0.
		{attnCase{name: "bidirectional", b: 1, hq: 2, hkv: 2, sq: 8, skv: 8, d: 8, dv: 8}, []int64{7, 7}, []int64{7, 6}},
		// With 5 cached keys, query 2 sits at position 7 and sees 0..7.
		{attnCase{name: "past", b: 1, hq: 2, hkv: 1, sq: 3, skv: 3, p: 5, d: 8, dv: 8, causal: true}, []int64{7, 0}, []int64{6, 0}},
		// nonpad 9 of 9 with 3 queries: the last sits at position 8.
		{attnCase{name: "nonpad", b: 2, hq: 2, hkv: 2, sq: 3, skv: 9, d: 8, dv: 8, nonpad: []int64{9, 4}, causal: true}, []int64{8, -1}, []int64{7, -1}},
	} {
		for _, mode := range []int{-1, 3} {
			t.Run(fmt.Sprintf("%s/mode%d", c.name, mode), func(t *testing.T) {
				run := func(window []int64) *value {
					k := c.attnCase
					k.opset, k.window, k.mode = 25, window, mode
					n := k.node()
					out, err := n.spec.run(testRun, n, k.inputs(3))
					require.NoError(t, err)
					return out[attnY]
				}
				none := run(nil)
				assert.Equal(t, none.data, run(c.wide).data, "window %v", c.wide)
				assert.Error(t, compareValues(run(c.narrow), none, tolerance{rtol: 1e-5, atol: 1e-6}), "window %v", c.narrow)
			})
		}
	}
}

// TestAttentionWindowAddsInfinity checks the window's NaN rule on both
// computations: the window is added to the scores like a mask, so a NaN
// key the window hides still makes the row NaN (NaN + −Inf), as in ONNX's
// reference and the specification's formulas.
func TestAttentionWindowAddsInfinity(t *testing.T) {
	c := attnCase{name: "nan", opset: 25, b: 1, hq: 1, hkv: 1, sq: 4, skv: 4, d: 2, dv: 2, causal: true, window: []int64{1, -1}}
	in := c.inputs(5)
	k := in[attnK].data.([]float32)
	k[0], k[1] = float32(math.NaN()), float32(math.NaN()) // key 0, seen by queries 0 and 1 only
	for _, mode := range []int{-1, 3} {
		c.mode = mode
		n := c.node()
		out, err := n.spec.run(testRun, n, in)
		require.NoError(t, err)
		for i, y := range out[attnY].data.([]float32) {
			assert.True(t, math.IsNaN(float64(y)), "mode %d: Y[%d] = %g, want NaN", mode, i, y)
		}
	}
}
