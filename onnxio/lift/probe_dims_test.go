package lift

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
	ir "github.com/attnrun/attnrun/onnxio/graph"
)

// decoderFixtures are the Hugging Face decoders of testdata/pytorch2 that
// take a KV cache (past_key_values.*) and return it extended (present.*).
var decoderFixtures = []string{
	"gpt2_sdpa_ts17", "gpt2_sdpa_dynamo18", "gpt2_sdpa_dynamo23",
	"llama_sdpa_ts17", "llama_sdpa_dynamo18", "llama_sdpa_dynamo23",
	"mistral_sdpa_ts17", "mistral_sdpa_dynamo18", "mistral_sdpa_dynamo23",
	"qwen3_sdpa_ts17", "qwen3_sdpa_dynamo18", "qwen3_sdpa_dynamo23",
	"gemma2_eager_ts17", "gemma2_eager_dynamo18", "gemma2_eager_dynamo23",
	"gemma3_sdpa_dynamo23", "opt_sdpa_ts17", "gpt_neox_sdpa_ts17", "falcon_sdpa_dynamo18",
	"falcon_sdpa_ts17", "gptj_eager_ts17", // gptj: its keys reach the present cache through a Cast
}

// TestProbeFindsCacheLength probes every decoder with a KV cache: the
// attention_mask's length (total_sequence, or the dynamo exporter's s53)
// must be found tied to past_sequence + sequence, and the probes must
// then give the present caches that many positions.
func TestProbeFindsCacheLength(t *testing.T) {
	for _, name := range decoderFixtures {
		t.Run(name, func(t *testing.T) {
			m, err := onnxio.ReadModel(filepath.Join("../../testdata/pytorch2/fixtures", name, "model.onnx"))
			require.NoError(t, err)
			m, _ = ir.InOrder(m)
			g, err := newGraph(m)
			require.NoError(t, err)
			g.limits = newExecLimits(context.Background(), 0)
			require.NoError(t, findDimSums(g, 2))
			require.Len(t, g.sums, 1, "ties found: %v", g.sums)
			var maskLen string
			for _, vi := range g.Inputs {
				if vi.GetName() == "attention_mask" {
					maskLen = onnxio.Dims(vi)[1].Param
				}
			}
			s := g.sums[0]
			assert.Equal(t, maskLen, s.dim)
			assert.ElementsMatch(t, []string{"past_sequence", "sequence"}, s.terms)
			for _, first := range []int{2, 3} {
				p, err := newProbe(g, first)
				require.NoError(t, err)
				shape, err := p.shape("present.0.key")
				require.NoError(t, err)
				assert.Equal(t, p.dims["past_sequence"]+p.dims["sequence"], shape[2], "present.0.key %v at dims %v", shape, p.dims)
				assert.Equal(t, shape[2], p.dims[maskLen])
			}
		})
	}
}

func TestParseSum(t *testing.T) {
	for expr, want := range map[string][]string{
		"past_sequence + sequence": {"past_sequence", "sequence"},
		"a+b+c":                    {"a", "b", "c"},
		"sequence":                 nil,
		"s + 1":                    nil,
		"2*s + t":                  nil,
		"a - b":                    nil,
		"a + ":                     nil,
	} {
		got, ok := parseSum(expr)
		assert.Equal(t, want != nil, ok, expr)
		assert.True(t, slices.Equal(want, got), "%q: %v", expr, got)
	}
}
