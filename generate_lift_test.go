package attnrun

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
)

// liftedDecoders are the decoder fixtures of testdata/pytorch2 whose lift
// must generate as Hugging Face does, by model of goldens.json.
var liftedDecoders = map[string][]string{
	"gpt2":  {"gpt2_sdpa_ts17", "gpt2_sdpa_dynamo18", "gpt2_sdpa_dynamo23"},
	"llama": {"llama_sdpa_ts17", "llama_sdpa_dynamo18", "llama_sdpa_dynamo23"},
	"qwen3": {"qwen3_sdpa_ts17", "qwen3_sdpa_dynamo18", "qwen3_sdpa_dynamo23"},
}

// TestGenerateLiftedDecoders lifts Hugging Face decoders as the PyTorch
// exporters wrote them (KV cache in and out) without --partial, writes the
// lifted file as `attnrun import` does and loads it as attnrun layers;
// `generate` on it returns exactly Hugging Face's greedy ids for 20 new
// tokens (testdata/generate/goldens.json, generate(do_sample=False) on the
// fixtures' weights), each step's logits are Hugging Face's, and each
// incremental step's logits equal one pass over the whole sequence, all
// within 1e-5 relative and 1e-6 absolute.
func TestGenerateLiftedDecoders(t *testing.T) {
	g := loadGenerateGoldens(t)
	for name, fixtures := range liftedDecoders {
		golden := g.Models[name]
		for _, fixture := range fixtures {
			t.Run(fixture, func(t *testing.T) {
				src, err := onnxio.ReadModel(filepath.Join("testdata", "pytorch2", "fixtures", fixture, "model.onnx"))
				require.NoError(t, err)
				res, err := lift.Lift(src)
				require.NoError(t, err, "the decoder must lift without --partial")
				require.Empty(t, res.Unlifted)
				out, _, err := lift.Export(src, res, export.Options{})
				require.NoError(t, err)
				path := filepath.Join(t.TempDir(), "lifted.onnx")
				require.NoError(t, onnxio.WriteModel(path, out))
				m, err := Load(path)
				require.NoError(t, err)
				require.Nil(t, m.graph, "the lifted file loads as attnrun layers")

				for _, run := range golden.Runs {
					gen, err := m.Generate(context.Background(), run.Prompt, GenerateOptions{MaxNewTokens: g.MaxNewTokens, EOS: golden.EOS})
					require.NoError(t, err)
					require.Equal(t, run.NewIDs, gen.IDs, "prompt %v", run.Prompt)
					require.Len(t, gen.Logits, len(run.Logits))
					for step, want := range run.Logits {
						assertLogits(t, want, gen.Logits[step], "prompt %v step %d", run.Prompt, step)
					}

					all := append(slices.Clone(run.Prompt), gen.IDs[:len(gen.IDs)-1]...)
					ids := tensor.New(tensor.WithShape(1, len(all)), tensor.WithBacking(all))
					mask := tensor.New(tensor.WithShape(1, len(all)), tensor.WithBacking(ones(len(all))))
					inputs := []*tensor.Dense{ids, mask}
					for _, vi := range src.GetGraph().GetInput()[2:] { // the past keys and values: none
						dims := onnxio.Dims(vi)
						shape := []int{1, int(dims[1].Value), 0, int(dims[3].Value)}
						inputs = append(inputs, tensor.New(tensor.WithShape(shape...), tensor.WithBacking([]float32{})))
					}
					full, err := m.Forward(context.Background(), inputs...)
					require.NoError(t, err)
					assertStepsEqualFull(t, full, run.Prompt, gen.Logits)
				}
			})
		}
	}
}
