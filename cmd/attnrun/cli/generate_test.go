package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGenerateHuggingFaceDecoders: attnrun generate prints the prompt and
// exactly the ids Hugging Face's generate(do_sample=False) returns
// (testdata/generate/goldens.json) for the GPT-2, Llama, Qwen3, Mistral and Gemma-2 fixtures.
func TestGenerateHuggingFaceDecoders(t *testing.T) {
	root := filepath.Join("..", "..", "..", "testdata")
	b, err := os.ReadFile(filepath.Join(root, "generate", "goldens.json"))
	require.NoError(t, err)
	var goldens struct {
		Models map[string]struct {
			Fixture string `json:"fixture"`
			EOS     *int64 `json:"eos_token_id"`
			Runs    []struct {
				Prompt []int64 `json:"prompt"`
				NewIDs []int64 `json:"new_ids"`
			} `json:"runs"`
		} `json:"models"`
	}
	require.NoError(t, json.Unmarshal(b, &goldens))
	require.Len(t, goldens.Models, 6)
	for name, g := range goldens.Models {
		if g.Fixture == "" {
			continue // a model checked as attnrun layers only
		}
		t.Run(name, func(t *testing.T) {
			run := g.Runs[len(g.Runs)-1] // 20 new ids for every model
			model := filepath.Join(root, "pytorch2", "fixtures", g.Fixture+"_ts17", "model.onnx")
			args := []string{"generate", model, "--ids", formatIDs(run.Prompt), "--max-new-tokens", "20"}
			if g.EOS != nil {
				args = append(args, "--eos", formatIDs([]int64{*g.EOS}))
			}
			status, stdout, stderr := attnrun(args...)
			require.Equal(t, 0, status, stderr)
			assert.Equal(t, formatIDs(append(run.Prompt, run.NewIDs...))+"\n", stdout)

			eos := run.NewIDs[3]
			status, stdout, stderr = attnrun("generate", model, "--ids", formatIDs(run.Prompt), "--eos", formatIDs([]int64{eos}))
			require.Equal(t, 0, status, stderr)
			ids := strings.Split(strings.TrimSpace(stdout), ",")
			assert.Equal(t, formatIDs([]int64{eos}), ids[len(ids)-1], "stops at the first --eos")
			assert.LessOrEqual(t, len(ids), len(run.Prompt)+4)
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	model := filepath.Join("..", "..", "..", "testdata", "pytorch2", "fixtures", "llama_sdpa_ts17", "model.onnx")
	checkFailures(t, []failure{
		{"no ids", []string{"generate", model}, 2, "--ids is required"},
		{"bad id", []string{"generate", model, "--ids", "1,x"}, 2, `--ids: "x" is not a token id`},
		{"no new tokens", []string{"generate", model, "--ids", "1", "--max-new-tokens", "0"}, 2, "--max-new-tokens must be positive, got 0"},
		{"weights of a graph", []string{"generate", model, "--ids", "1", "--weights", "w.npz"}, 2, "--weights applies to a model config"},
		{"float model", []string{"generate", "seed-mha-wrapper", "--ids", "1"}, 1, "generate needs a model whose first input is int64 token ids"},
	})
}
