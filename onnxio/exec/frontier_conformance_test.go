package exec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
)

// The node tests of LinearAttention, SwiGLU and ai.onnx.preview
// FlexAttention in sharedNodeTests have expected outputs from ONNX's
// reference implementation (ONNX Runtime 1.30 runs none of these ops).

// frontierRefusal says why New refuses a node test of the frontier ops, or
// "" for a test that must pass.
func frontierRefusal(name string) string {
	if strings.Contains(name, "fp16") || strings.Contains(name, "float16") {
		return "float16 tensors"
	}
	return ""
}

// TestFrontierConformance runs ONNX's node tests of LinearAttention,
// FlexAttention (with its expanded graphs) and SwiGLU: each must match
// ONNX's expected outputs, or be refused by New for the reason
// frontierRefusal gives. They match at rtol 1e-5, atol 1e-7 (float64 at
// rtol 1e-12), far inside the tolerance of ../shared/conformance/run.sh
// (rtol 1e-3, atol 1e-5).
func TestFrontierConformance(t *testing.T) {
	if _, err := os.Stat(sharedNodeTests); err != nil {
		t.Skipf("ONNX node tests not found at %s (../shared/conformance)", sharedNodeTests)
	}
	counts := map[string][2]int{} // family: passed, refused
	for _, family := range []string{"test_linear_attention", "test_flexattention", "test_swiglu"} {
		dirs, err := filepath.Glob(filepath.Join(sharedNodeTests, family+"*"))
		require.NoError(t, err)
		require.NotEmpty(t, dirs, family)
		for _, dir := range dirs {
			name := filepath.Base(dir)
			m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err, name)
			c := counts[family]
			if reason := frontierRefusal(name); reason != "" {
				_, err := New(m)
				assert.Error(t, err, "%s is listed as refused (%s) but New accepts it", name, reason)
				c[1]++
			} else {
				assert.NoError(t, runNodeTest(m, dir, strict32), name)
				c[0]++
			}
			counts[family] = c
		}
	}
	for family, c := range counts {
		t.Logf("%s*: %d pass, %d refused", family, c[0], c[1])
	}
	assert.Equal(t, map[string][2]int{
		"test_linear_attention": {26, 2}, "test_flexattention": {20, 2}, "test_swiglu": {4, 2},
	}, counts)
}
