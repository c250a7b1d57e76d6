package attnrun

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/models"
)

// generateGoldens is testdata/generate/goldens.json, written by
// testdata/generate/gen.py: Hugging Face's generate(do_sample=False) on the
// decoder fixtures of testdata/pytorch2.
type generateGoldens struct {
	MaxNewTokens int `json:"max_new_tokens"`
	Models       map[string]struct {
		Fixture string `json:"fixture"`
		EOS     *int64 `json:"eos_token_id"`
		Runs    []struct {
			Prompt []int64     `json:"prompt"`
			NewIDs []int64     `json:"new_ids"`
			Logits [][]float64 `json:"logits"`
		} `json:"runs"`
	} `json:"models"`
}

func loadGenerateGoldens(t *testing.T) generateGoldens {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "generate", "goldens.json"))
	require.NoError(t, err)
	var g generateGoldens
	require.NoError(t, json.Unmarshal(b, &g))
	require.Len(t, g.Models, 6)
	return g
}

// TestGenerateMatchesHuggingFace: for GPT-2, Llama, Qwen3, Mistral (sliding
// window) and Gemma-2 (softcapping, its EOS stopping two prompts), exported by
// both PyTorch exporters (TorchScript at opset 17, dynamo at 18 and 23),
// greedy decoding through the KV cache on the executor returns exactly
// Hugging Face's ids for 20 new tokens, and each step's logits are
// Hugging Face's within 1e-5 relative, 1e-6 absolute.
func TestGenerateMatchesHuggingFace(t *testing.T) {
	g := loadGenerateGoldens(t)
	for name, golden := range g.Models {
		if golden.Fixture == "" {
			continue // checked as layers only
		}
		for _, exporter := range []string{"ts17", "dynamo18", "dynamo23"} {
			t.Run(name+"_"+exporter, func(t *testing.T) {
				path := filepath.Join("testdata", "pytorch2", "fixtures", golden.Fixture+"_"+exporter, "model.onnx")
				m, err := Load(path, WithExecutor())
				require.NoError(t, err)
				for _, run := range golden.Runs {
					gen, err := m.Generate(context.Background(), run.Prompt, GenerateOptions{MaxNewTokens: g.MaxNewTokens, EOS: golden.EOS})
					require.NoError(t, err)
					require.Equal(t, run.NewIDs, gen.IDs, "prompt %v", run.Prompt)
					require.Len(t, gen.Logits, len(run.Logits))
					for step, want := range run.Logits {
						assertLogits(t, want, gen.Logits[step], "prompt %v step %d", run.Prompt, step)
					}
				}
			})
		}
	}
}

// TestGenerateWithoutCache: a decoder exported without its KV cache
// (GPT-2's nocache fixtures, the same weights as the cached ones) is run
// on the whole sequence at every step, with the same ids and logits.
func TestGenerateWithoutCache(t *testing.T) {
	golden := loadGenerateGoldens(t).Models["gpt2"]
	for _, exporter := range []string{"ts17", "dynamo18", "dynamo23"} {
		m, err := Load(filepath.Join("testdata", "pytorch2", "fixtures", "gpt2_nocache_sdpa_"+exporter, "model.onnx"), WithExecutor())
		require.NoError(t, err)
		for _, run := range golden.Runs {
			gen, err := m.Generate(context.Background(), run.Prompt, GenerateOptions{MaxNewTokens: 20})
			require.NoError(t, err)
			require.Equal(t, run.NewIDs, gen.IDs, "%s prompt %v", exporter, run.Prompt)
			for step, want := range run.Logits {
				assertLogits(t, want, gen.Logits[step], "%s prompt %v step %d", exporter, run.Prompt, step)
			}
		}
	}
}

// TestGenerateIncrementalEqualsFullSequence: the logits of each cached
// step equal those of one pass over the whole sequence (prompt and the
// generated ids) from an empty cache.
func TestGenerateIncrementalEqualsFullSequence(t *testing.T) {
	g := loadGenerateGoldens(t)
	for name, golden := range g.Models {
		if golden.Fixture == "" {
			continue // checked as layers only
		}
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", "pytorch2", "fixtures", golden.Fixture+"_ts17", "model.onnx")
			m, err := Load(path, WithExecutor())
			require.NoError(t, err)
			prompt := golden.Runs[0].Prompt
			gen, err := m.Generate(context.Background(), prompt, GenerateOptions{MaxNewTokens: g.MaxNewTokens})
			require.NoError(t, err)

			d, err := newGraphDecoder(path, m.graph)
			require.NoError(t, err)
			all := append(slices.Clone(prompt), gen.IDs[:len(gen.IDs)-1]...)
			feeds := map[string]*array.Array{"input_ids": array.FromSlice([]int{1, len(all)}, all)}
			ones := make([]int64, len(all))
			for i := range ones {
				ones[i] = 1
			}
			feeds["attention_mask"] = array.FromSlice([]int{1, len(all)}, ones)
			for k, v := range d.past {
				feeds[k] = v
			}
			outs, err := m.graph.RunArrays(context.Background(), feeds)
			require.NoError(t, err)
			logits := outs["logits"]
			vocab := logits.Shape[2]
			full := logits.Data.([]float32)
			for step, got := range gen.Logits {
				pos := len(prompt) - 1 + step
				want := make([]float64, vocab)
				for i, v := range full[pos*vocab : (pos+1)*vocab] {
					want[i] = float64(v)
				}
				assertLogits(t, want, got, "step %d", step)
			}
		})
	}
}

// assertStepsEqualFull checks the logits each generation step was picked
// from against the full pass over prompt and the new ids, full (1, T,
// vocab), at the step's position.
func assertStepsEqualFull(t *testing.T, full *tensor.Dense, prompt []int64, steps [][]float32) {
	t.Helper()
	vocab := full.Shape()[2]
	data := full.Data().([]float32)
	for step, got := range steps {
		pos := len(prompt) - 1 + step
		want := make([]float64, vocab)
		for i, v := range data[pos*vocab : (pos+1)*vocab] {
			want[i] = float64(v)
		}
		assertLogits(t, want, got, "prompt %v: step %d against the full sequence", prompt, step)
	}
}

// assertLogits checks one step's logits within 1e-5 relative, 1e-6 absolute.
func assertLogits(t *testing.T, want []float64, got []float32, msgAndArgs ...any) {
	t.Helper()
	require.Len(t, got, len(want), msgAndArgs...)
	for i, w := range want {
		if diff := math.Abs(float64(got[i]) - w); diff > 1e-6+1e-5*math.Abs(w) {
			require.Failf(t, "logit differs", "logit %d: got %.7g, want %.7g (diff %.3g) %v", i, got[i], w, diff, msgAndArgs)
		}
	}
}

// TestGenerateLayersMatchesPyTorch: a decoder of attnrun layers
// (testdata/generate/decoder.yaml: embedding, offset positions, causal
// attention, tied head) on PyTorch's weights generates PyTorch's greedy
// ids, stepping through its KV cache where PyTorch recomputed the whole
// sequence, with each step's logits within 1e-5 relative, 1e-6 absolute.
func TestGenerateLayersMatchesPyTorch(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "generate", "layers.json"))
	require.NoError(t, err)
	var golden struct {
		MaxNewTokens int                        `json:"max_new_tokens"`
		Params       map[string]json.RawMessage `json:"params"`
		Runs         []struct {
			Prompt []int64     `json:"prompt"`
			NewIDs []int64     `json:"new_ids"`
			Logits [][]float64 `json:"logits"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal(b, &golden))
	dict := map[string]*tensor.Dense{}
	for name, raw := range golden.Params {
		dict[name] = nestedTensor(t, raw)
	}
	// decoder_masked.yaml is the same model with Hugging Face's interface:
	// attention_mask (ones) and position_ids (arange) inputs.
	for _, config := range []string{"decoder.yaml", "decoder_masked.yaml"} {
		layers, err := models.Load(filepath.Join("testdata", "generate", config))
		require.NoError(t, err)
		require.NoError(t, layers.LoadStateDict(dict))
		m, err := withLayers(layers, config, nil, settings{})
		require.NoError(t, err)
		for _, run := range golden.Runs {
			gen, err := m.Generate(context.Background(), run.Prompt, GenerateOptions{MaxNewTokens: golden.MaxNewTokens})
			require.NoError(t, err)
			require.Equal(t, run.NewIDs, gen.IDs, "%s prompt %v", config, run.Prompt)
			for step, want := range run.Logits {
				assertLogits(t, want, gen.Logits[step], "%s prompt %v step %d", config, run.Prompt, step)
			}
		}
	}
	layers, err := models.Load(filepath.Join("testdata", "generate", "decoder.yaml"))
	require.NoError(t, err)
	require.NoError(t, layers.LoadStateDict(dict))
	m, err := withLayers(layers, "decoder.yaml", nil, settings{})
	require.NoError(t, err)
	eos := golden.Runs[0].NewIDs[2]
	gen, err := m.Generate(context.Background(), golden.Runs[0].Prompt, GenerateOptions{MaxNewTokens: golden.MaxNewTokens, EOS: &eos})
	require.NoError(t, err)
	require.Equal(t, golden.Runs[0].NewIDs[:slices.Index(golden.Runs[0].NewIDs, eos)+1], gen.IDs, "stops after the first EOS")
}

// nestedTensor reads a JSON nested list of numbers as a float32 tensor.
func nestedTensor(t *testing.T, raw json.RawMessage) *tensor.Dense {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	var shape []int
	var data []float32
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		switch x := v.(type) {
		case float64:
			data = append(data, float32(x))
		case []any:
			if depth == len(shape) {
				shape = append(shape, len(x))
			}
			for _, e := range x {
				walk(e, depth+1)
			}
		}
	}
	walk(v, 0)
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

func TestGenerateErrors(t *testing.T) {
	ctx := context.Background()
	fixture := filepath.Join("testdata", "pytorch2", "fixtures", "llama_sdpa_ts17", "model.onnx")
	m, err := Load(fixture, WithExecutor())
	require.NoError(t, err)
	_, err = m.Generate(ctx, nil, GenerateOptions{MaxNewTokens: 1})
	require.ErrorContains(t, err, "generate needs a prompt of at least one token id")
	_, err = m.Generate(ctx, []int64{1}, GenerateOptions{})
	require.ErrorContains(t, err, "MaxNewTokens must be positive, got 0")
	_, err = m.Generate(ctx, []int64{1, 40}, GenerateOptions{MaxNewTokens: 1})
	require.ErrorContains(t, err, "step 0")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = m.Generate(canceled, []int64{1}, GenerateOptions{MaxNewTokens: 3})
	require.ErrorIs(t, err, context.Canceled)
	layers, err := Load(filepath.Join("testdata", "generate", "llama.yaml"), WithWeights(filepath.Join("testdata", "generate", "llama.npz")))
	require.NoError(t, err)
	_, err = layers.Generate(canceled, []int64{1}, GenerateOptions{MaxNewTokens: 3})
	require.ErrorIs(t, err, context.Canceled)

	encoder, err := Load(filepath.Join("testdata", "pytorch2", "fixtures", "bert_sdpa_ts17", "model.onnx"), WithExecutor())
	require.NoError(t, err)
	_, err = encoder.Generate(ctx, []int64{1}, GenerateOptions{MaxNewTokens: 1})
	require.ErrorContains(t, err, `generate does not know what to feed input "token_type_ids"`)

	floats, err := Load("seed-mha-wrapper")
	require.NoError(t, err)
	_, err = floats.Generate(ctx, []int64{1}, GenerateOptions{MaxNewTokens: 1})
	require.ErrorContains(t, err, "generate needs a model whose first input is int64 token ids")

	require.Equal(t, "present.0.key", presentName("past_key_values.0.key"))
	require.Equal(t, "present.1", presentName("past.1"))
	_, err = argmax([]float32{1, float32(math.NaN())})
	require.ErrorContains(t, err, "logit 1 is NaN")
	id, err := argmax([]float32{1, 3, 3, 2})
	require.NoError(t, err)
	require.Equal(t, int64(1), id, "the first of equal logits, as torch.argmax")
}

// TestGenerateHuggingFaceAsLayers: the GPT-2, Llama, Qwen3, Mistral and
// Gemma-2 fixtures, and OPT (learned positions offset by 2), written as
// attnrun layers (testdata/generate/<model>.yaml,
// Hugging Face's weights renamed in <model>.npz; GPT-2's and Gemma-2's heads
// tied to the embedding, Gemma-2's final activation.softcap) give
// Hugging Face's greedy ids and step logits through models.Step's KV
// caches: what a lifted decoder must do. Each step's logits also equal
// one Forward over the whole sequence.
func TestGenerateHuggingFaceAsLayers(t *testing.T) {
	g := loadGenerateGoldens(t)
	for name, golden := range g.Models {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "generate")
			m, err := Load(filepath.Join(dir, name+".yaml"), WithWeights(filepath.Join(dir, name+".npz")))
			require.NoError(t, err)
			for _, run := range golden.Runs {
				gen, err := m.Generate(context.Background(), run.Prompt, GenerateOptions{MaxNewTokens: g.MaxNewTokens, EOS: golden.EOS})
				require.NoError(t, err)
				require.Equal(t, run.NewIDs, gen.IDs, "prompt %v", run.Prompt)
				for step, want := range run.Logits {
					assertLogits(t, want, gen.Logits[step], "prompt %v step %d", run.Prompt, step)
				}

				all := append(slices.Clone(run.Prompt), gen.IDs[:len(gen.IDs)-1]...)
				full, err := m.Forward(context.Background(), tensor.New(tensor.WithShape(1, len(all)), tensor.WithBacking(all)))
				require.NoError(t, err)
				assertStepsEqualFull(t, full, run.Prompt, gen.Logits)
			}
		})
	}
}
