package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// realWorldGraphs holds ONNX Runtime's own transformer test graphs with
// ONNX Runtime's outputs (../shared/realworld/README.md).
const realWorldGraphs = "../../../../shared/realworld/ort-graphs"

// realWorldExecutorGaps lists the graphs the executor cannot run yet, with
// the reason. The test asserts that each still fails, so that a graph that
// starts to pass must leave this list.
var realWorldExecutorGaps = map[string]string{
	"attn_mask1d_fp16": "float16 inputs",
	"attn_nomask_fp16": "float16 inputs",
}

// realWorldWarnings are the leniencies some graphs need; `check` must say
// so on stderr.
var realWorldWarnings = map[string]string{
	"gen_bert_attention":       `op "LayerNormalization" at opset 16 runs with its opset-17 semantics`,
	"fusion_int32_mask":        `op "LayerNormalization" at opset 9 runs with its opset-17 semantics`,
	"gen_tf2onnx_attention_3d": `has unknown attribute "epsion", ignored`,
	"gpt2_tiny12_past":         `the later producer wins`,
	"bert_toy":                 `nodes are not in topological order`,
}

// TestRealWorldGraphsOnTheExecutor runs `attnrun check` on every real-world
// graph against ONNX Runtime's outputs at the default tolerance.
func TestRealWorldGraphsOnTheExecutor(t *testing.T) {
	if _, err := os.Stat(realWorldGraphs); err != nil {
		t.Skipf("%s is absent (it comes with the project's shared material): %v", realWorldGraphs, err)
	}
	models, err := filepath.Glob(realWorldGraphs + "/*/model.onnx")
	require.NoError(t, err)
	require.Len(t, models, 22)
	for _, m := range models {
		name := filepath.Base(filepath.Dir(m))
		t.Run(name, func(t *testing.T) {
			status, out, stderr := attnrun("check", m, "--data", filepath.Dir(m))
			if reason, gap := realWorldExecutorGaps[name]; gap {
				assert.NotEqual(t, 0, status, "%s now passes: remove it from realWorldExecutorGaps (%s)", name, reason)
				return
			}
			require.Equal(t, 0, status, out+stderr)
			assert.Contains(t, out, " 0 failed")
			if w, ok := realWorldWarnings[name]; ok {
				assert.Contains(t, stderr, "attnrun: warning: ")
				assert.Contains(t, stderr, w)
			}
		})
	}
}
