package attnrun

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/registry"
)

// cacheDecoders are the decoders whose Hugging Face weights
// testdata/generate holds as attnrun layers (gen.py), with the fixture of
// testdata/pytorch2 each was checked against. Mistral's and Gemma-2's
// sliding-window layers keep the whole cache of a resumed session, as
// Hugging Face's present does.
var cacheDecoders = map[string]string{"gpt2": "gpt2_sdpa", "llama": "llama_sdpa", "qwen3": "qwen3_sdpa", "mistral": "mistral_sdpa", "gemma2": "gemma2_eager"}

// loadLayersDecoder loads testdata/generate/<name>.yaml with its weights
// and lists its attention layers, whose caches are the graph's
// past_key_values.<i> in order.
func loadLayersDecoder(t *testing.T, name string) (*models.Model, []string) {
	t.Helper()
	dir := filepath.Join("testdata", "generate")
	m, err := Load(filepath.Join(dir, name+".yaml"), WithWeights(filepath.Join(dir, name+".npz")))
	require.NoError(t, err)
	var attn []string
	for _, l := range m.Layers().Config().Layers {
		if l.Type == "attention.sdpa" {
			attn = append(attn, l.Name)
		}
	}
	require.NotEmpty(t, attn)
	return m.Layers(), attn
}

// stepWithCache runs a layers model as the past/present graph runs: it
// resumes a session from the past caches (B, KVH, P, hd) of each attention
// layer (none when P is 0), steps the ids (B, T), and returns the logits
// and each layer's present cache.
func stepWithCache(t *testing.T, m *models.Model, attn []string, ids *tensor.Dense, past []models.KV, pastLen int) (*tensor.Dense, []models.KV) {
	t.Helper()
	cache := map[string]models.KV{}
	if pastLen > 0 {
		for i, layer := range attn {
			cache[layer] = past[i]
		}
	}
	s, err := m.Resume(cache, ids.Shape()[0], pastLen)
	require.NoError(t, err)
	require.Equal(t, pastLen, s.Tokens())
	logits, err := m.Step(&registry.Run{Context: context.Background()}, s, ids)
	require.NoError(t, err)
	require.Equal(t, attn, s.CacheLayers())
	var present []models.KV
	for _, layer := range attn {
		kv, err := s.Cache(layer)
		require.NoError(t, err)
		present = append(present, kv)
	}
	return logits, present
}

// assertClose compares a tensor with a reference array, shape and values
// within 1e-5 relative, 1e-6 absolute.
func assertClose(t *testing.T, want *array.Array, got *tensor.Dense, what string) {
	t.Helper()
	require.NotNil(t, got, what)
	require.Equal(t, want.Shape, []int(got.Shape()), what)
	w, ok := want.Data.([]float32)
	require.True(t, ok, what)
	wf := make([]float64, len(w))
	for i, v := range w {
		wf[i] = float64(v)
	}
	assertLogits(t, wf, got.Data().([]float32), what)
}

// TestResumeMatchesPastPresentGraph: the Hugging Face decoders as attnrun
// layers, run as their past/present graphs run (Model.Resume from the
// test-data set's past_key_values, Step on its input_ids, State.Cache
// read as present), give PyTorch's logits and present caches within
// 1e-5 relative, 1e-6 absolute, with a past of 3 tokens (test_data_set_0)
// and with none (test_data_set_1).
func TestResumeMatchesPastPresentGraph(t *testing.T) {
	for name, fixture := range cacheDecoders {
		t.Run(name, func(t *testing.T) {
			m, attn := loadLayersDecoder(t, name)
			for _, set := range []string{"test_data_set_0", "test_data_set_1"} {
				in, out, err := onnxio.ReadDataSetArrays(filepath.Join("testdata", "pytorch2", "fixtures", fixture+"_ts17", set))
				require.NoError(t, err)
				require.Len(t, in, 2+2*len(attn))
				require.Len(t, out, 1+2*len(attn))
				require.Equal(t, slices.Repeat([]int64{1}, in[1].Len()), in[1].Data, "%s: the attention_mask hides nothing (the layers take none)", set)
				ids, err := in[0].Dense()
				require.NoError(t, err)
				pastLen := in[2].Shape[2]
				past := make([]models.KV, len(attn))
				if pastLen > 0 {
					for i := range attn {
						k, err := in[2+2*i].Dense()
						require.NoError(t, err)
						v, err := in[3+2*i].Dense()
						require.NoError(t, err)
						past[i] = models.KV{Keys: k, Values: v}
					}
				}
				logits, present := stepWithCache(t, m, attn, ids, past, pastLen)
				assertClose(t, out[0], logits, set+" logits")
				for i := range attn {
					assertClose(t, out[1+2*i], present[i].Keys, fmt.Sprintf("%s present.%d.key", set, i))
					assertClose(t, out[2+2*i], present[i].Values, fmt.Sprintf("%s present.%d.value", set, i))
				}
			}
		})
	}
}

// TestResumeTokenByTokenEqualsGraph decodes a prompt token by token two
// ways: the past/present graph on the executor, feeding back its present;
// and the layers, each step resumed from the graph's cache. At every step
// the logits and the present caches agree within 1e-5 relative, 1e-6
// absolute, so the layers can stand in for the graph at any step.
func TestResumeTokenByTokenEqualsGraph(t *testing.T) {
	ids := []int64{3, 7, 9, 19, 21, 18, 4, 23}
	for name, fixture := range cacheDecoders {
		for _, exporter := range []string{"ts17", "dynamo18"} {
			t.Run(name+"_"+exporter, func(t *testing.T) {
				m, attn := loadLayersDecoder(t, name)
				src, err := onnxio.ReadModel(filepath.Join("testdata", "pytorch2", "fixtures", fixture+"_"+exporter, "model.onnx"))
				require.NoError(t, err)
				g, err := exec.New(src)
				require.NoError(t, err)
				feeds := map[string]*array.Array{}
				past := make([]models.KV, len(attn))
				for step, id := range ids {
					feeds["input_ids"] = array.FromSlice([]int{1, 1}, []int64{id})
					feeds["attention_mask"] = array.FromSlice([]int{1, step + 1}, slices.Repeat([]int64{1}, step+1))
					if step == 0 {
						for _, in := range g.Inputs() {
							if in.Name != "input_ids" && in.Name != "attention_mask" {
								empty, err := array.New(array.Float32, 1, int(in.Shape[1].Value), 0, int(in.Shape[3].Value))
								require.NoError(t, err)
								feeds[in.Name] = empty
							}
						}
					}
					outs, err := g.RunArrays(context.Background(), feeds)
					require.NoError(t, err)
					logits, present := stepWithCache(t, m, attn, tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]int64{id})), past, step)
					assertClose(t, outs["logits"], logits, fmt.Sprintf("step %d logits", step))
					for i := range attn {
						k, v := fmt.Sprintf("present.%d.key", i), fmt.Sprintf("present.%d.value", i)
						assertClose(t, outs[k], present[i].Keys, fmt.Sprintf("step %d %s", step, k))
						assertClose(t, outs[v], present[i].Values, fmt.Sprintf("step %d %s", step, v))
						feeds[fmt.Sprintf("past_key_values.%d.key", i)] = outs[k]
						feeds[fmt.Sprintf("past_key_values.%d.value", i)] = outs[v]
						gk, err := outs[k].Dense()
						require.NoError(t, err)
						gv, err := outs[v].Dense()
						require.NoError(t, err)
						past[i] = models.KV{Keys: gk, Values: gv}
					}
				}
			})
		}
	}
}

// TestResumeErrors: a cache of the wrong shape, for a layer the model does
// not have, or missing for an attention layer is refused with the layer
// named; a sliding-window layer that dropped keys says so rather than
// returning a shorter cache.
func TestResumeErrors(t *testing.T) {
	m, attn := loadLayersDecoder(t, "llama")
	kv := func(shape ...int) models.KV {
		n := 1
		for _, d := range shape {
			n *= d
		}
		return models.KV{Keys: tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]float32, n))),
			Values: tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]float32, n)))}
	}
	good := map[string]models.KV{attn[0]: kv(1, 2, 3, 16), attn[1]: kv(1, 2, 3, 16)}
	_, err := m.Resume(good, 1, 3)
	require.NoError(t, err)
	_, err = m.Resume(map[string]models.KV{attn[0]: kv(1, 4, 3, 16), attn[1]: kv(1, 2, 3, 16)}, 1, 3)
	require.ErrorContains(t, err, `layer "l0_self_attn" (attention.sdpa): resume: keys: shape (1, 4, 3, 16), want (B, num_kv_heads, T, head_dim) (1, 2, 3, 16)`)
	_, err = m.Resume(map[string]models.KV{attn[0]: kv(1, 2, 3, 16)}, 1, 3)
	require.ErrorContains(t, err, `layer "l1_self_attn" (attention.sdpa): resume: keys: missing`)
	_, err = m.Resume(map[string]models.KV{attn[0]: kv(1, 2, 3, 16), attn[1]: kv(1, 2, 3, 16), "nope": kv(1, 2, 3, 16)}, 1, 3)
	require.ErrorContains(t, err, `"nope"`)
	_, err = m.Resume(good, 1, 0)
	require.ErrorContains(t, err, "resume after no tokens takes no cache")

	w, wattn := loadLayersDecoder(t, "mistral") // window 4: a session of its own keeps 3 keys
	ids := tensor.New(tensor.WithShape(1, 5), tensor.WithBacking([]int64{1, 2, 3, 4, 5}))
	s, err := w.NewState()
	require.NoError(t, err)
	_, err = w.Step(nil, s, ids)
	require.NoError(t, err)
	_, err = s.Cache(wattn[0])
	require.ErrorContains(t, err, "keeps the last 3 keys of its window (window 4), not the 5 of the session")
	s, err = w.Resume(nil, 1, 0) // the caller's cache: kept whole
	require.NoError(t, err)
	_, err = w.Step(nil, s, ids)
	require.NoError(t, err)
	got, err := s.Cache(wattn[0])
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 5, 16}, []int(got.Keys.Shape()))
}

// TestGenerateLiftedDecoder lifts the tiny decoder with a KV cache of
// onnxio/lift/testdata (export_kvcache.py), writes it as attnrun import
// does, and generates from the written file: its attnrun layers step
// through their caches and return PyTorch's greedy ids (the whole sequence
// recomputed at every step), as the source graph does on the executor,
// feeding its present back as past; each step's logits agree within
// 1e-5 relative, 1e-6 absolute.
func TestGenerateLiftedDecoder(t *testing.T) {
	dir := filepath.Join("onnxio", "lift", "testdata", "kvcache_decoder_dynamic")
	b, err := os.ReadFile(filepath.Join(dir, "generate.json"))
	require.NoError(t, err)
	var golden struct {
		Prompt []int64 `json:"prompt"`
		NewIDs []int64 `json:"new_ids"`
	}
	require.NoError(t, json.Unmarshal(b, &golden))
	src, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	res, err := lift.Lift(src)
	require.NoError(t, err)
	file, _, err := lift.Export(src, res, export.Options{})
	require.NoError(t, err)
	lifted := filepath.Join(t.TempDir(), "lifted.onnx")
	require.NoError(t, onnxio.WriteModel(lifted, file))

	var runs []*Generation
	for _, path := range []string{lifted, filepath.Join(dir, "model.onnx")} {
		m, err := Load(path)
		require.NoError(t, err)
		require.Equal(t, path == lifted, m.Layers() != nil, "%s runs on attnrun layers", path)
		gen, err := m.Generate(context.Background(), golden.Prompt, GenerateOptions{MaxNewTokens: len(golden.NewIDs)})
		require.NoError(t, err)
		require.Equal(t, golden.NewIDs, gen.IDs, path)
		runs = append(runs, gen)
	}
	for step, want := range runs[1].Logits {
		wf := make([]float64, len(want))
		for i, v := range want {
			wf[i] = float64(v)
		}
		assertLogits(t, wf, runs[0].Logits[step], "step %d", step)
	}
}
