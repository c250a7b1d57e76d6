package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// realWorldLifted are the real-world graphs that lift completely (import
// without --partial) into a file that passes check against ONNX Runtime's
// outputs. The test fails when one of them stops lifting, and when a graph
// not listed starts to: then it belongs here.
var realWorldLifted = []string{
	"attn_mask1d_fp16",
	"attn_mask1d_fp32",
	"attn_mask2d_fp32",
	"attn_nomask_fp16",
	"attn_past_state",
	"attn_past_state_u8s8",
	"bert_toy",
	"fusion_int32_mask",
	"fusion_mask_no_cast",
	"fusion_symbolic_batch",
	"gen_bert_attention",
	"gen_bert_attention_float_mask",
	"gen_bert_attention_pruned",
	"gen_bert_attention_rev_add",
	"gen_gpt2_attention",
	"gen_gpt2_attention_add",
	"gen_tf2onnx_attention_3d",
	"gpt2_tiny12_past",
	"megatron_bart_self_attn",
	"tfbert_squad_keras2onnx",
}

// realWorldPartialGaps are the graphs that do not even lift with
// --partial, with the reason.
var realWorldPartialGaps = map[string]string{}

// TestRealWorldGraphsLift lifts every real-world graph as
// ../shared/realworld/check.sh does: import without --partial, then check
// the lifted file against ONNX Runtime's outputs; a graph that does not
// lift completely must lift with --partial (its unlifted nodes named, node
// by node, with the reason), into a file that passes check too.
func TestRealWorldGraphsLift(t *testing.T) {
	if _, err := os.Stat(realWorldGraphs); err != nil {
		t.Skipf("%s is absent (it comes with the project's shared material): %v", realWorldGraphs, err)
	}
	models, err := filepath.Glob(realWorldGraphs + "/*/model.onnx")
	require.NoError(t, err)
	require.Len(t, models, 22)
	want := map[string]bool{}
	for _, name := range realWorldLifted {
		want[name] = true
	}
	var lifted, partial []string
	for _, m := range models {
		name := filepath.Base(filepath.Dir(m))
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "lifted.onnx")
			status, stdout, stderr := attnrun("import", m, "-o", out)
			if status == 0 {
				counts := regexp.MustCompile(`lifted (\d+) of (\d+) computing nodes into attnrun layers\n`).FindStringSubmatch(stdout)
				require.NotNil(t, counts, stdout)
				assert.Equal(t, counts[2], counts[1], "a complete lift lifts every node")
				assert.NotContains(t, stdout, "kept as ONNX subgraphs")
				assertChecks(t, out, filepath.Dir(m))
				lifted = append(lifted, name)
				assert.True(t, want[name], "%s now lifts: add it to realWorldLifted", name)
				return
			}
			assert.False(t, want[name], "%s no longer lifts:\n%s", name, stdout+stderr)
			status, stdout, stderr = attnrun("import", m, "-o", out, "--partial")
			if reason, gap := realWorldPartialGaps[name]; gap {
				assert.NotEqual(t, 0, status, "%s now lifts with --partial: remove it from realWorldPartialGaps (%s)", name, reason)
				return
			}
			require.Equal(t, 0, status, stdout+stderr)
			assert.Regexp(t, `lifted \d+ of \d+ computing nodes into attnrun layers; \d+ kept as ONNX subgraphs`, stdout)
			assert.Contains(t, stdout, "kept as ONNX subgraphs (onnx.subgraph layers):")
			assertChecks(t, out, filepath.Dir(m))
			partial = append(partial, name)
		})
	}
	sort.Strings(lifted)
	t.Logf("import: %d of %d lift completely (%s); %d more with --partial (%s)", len(lifted), len(models),
		strings.Join(lifted, ", "), len(partial), strings.Join(partial, ", "))
	assert.GreaterOrEqual(t, len(lifted), len(realWorldLifted))
}

// assertChecks runs check on a lifted file against a data folder.
func assertChecks(t *testing.T, model, data string) {
	t.Helper()
	status, out, stderr := attnrun("check", model, "--data", data)
	require.Equal(t, 0, status, out+stderr)
	assert.Contains(t, out, " 0 failed")
}
