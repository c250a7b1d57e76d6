package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio/exec"
)

// BenchmarkGreedy times greedy decoding on attnrun's graph executor: for
// each ATTNRUN_BENCH_MODELS/<model>/greedy_<n>/test_data_set_0 (the prompt,
// its attention_mask and an empty KV cache as inputs, PyTorch's n tokens
// as output), one op is the whole generation: the prompt, then one step per
// new token with present fed back as past. Every token is checked against
// PyTorch's before timing. It reports median-ms of a generation and
// tokens/s at the median.
//
//	ATTNRUN_BENCH_MODELS=~/.cache/attnrun/bench go test ./bench -run '^$' \
//	    -bench 'Greedy/gpt2/greedy_32$' -cpu 2 -benchtime 5s -benchmem
func BenchmarkGreedy(b *testing.B) {
	root := os.Getenv("ATTNRUN_BENCH_MODELS")
	if root == "" {
		b.Skip("ATTNRUN_BENCH_MODELS is not set: run testdata/bench_models/models_bench.py export --out DIR and set it to DIR")
	}
	sets, err := filepath.Glob(filepath.Join(root, "*", "greedy_*", "test_data_set_0"))
	if err != nil {
		b.Fatal(err)
	}
	for _, set := range sets {
		shapeDir := filepath.Dir(set)
		modelDir := filepath.Dir(shapeDir)
		b.Run(filepath.Base(modelDir)+"/"+filepath.Base(shapeDir), func(b *testing.B) {
			g, err := prepare(filepath.Join(modelDir, "model.onnx"))
			if err != nil {
				b.Fatal(err)
			}
			prompt, want, err := readSet(g, set)
			if err != nil {
				b.Fatal(err)
			}
			wantTokens, ok := want.Data.([]int64)
			if !ok {
				b.Fatalf("%s: output_0 is %s, want the int64 tokens", set, want.DType)
			}
			ctx := context.Background()
			got, err := generate(ctx, g, prompt, len(wantTokens))
			if err != nil {
				b.Fatalf("%s: %v", set, err)
			}
			if !slices.Equal(got, wantTokens) {
				b.Fatalf("%s: tokens %v, PyTorch's %v", set, got, wantTokens)
			}
			b.ReportAllocs()
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				if _, err := generate(ctx, g, prompt, len(wantTokens)); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(times)
			median := quantileMS(times, 0.5)
			b.ReportMetric(median, "median-ms")
			b.ReportMetric(float64(len(wantTokens))*1000/median, "tokens/s")
		})
	}
}

// generate decodes n tokens greedily: the prompt's inputs first, then the
// last token chosen, the attention_mask one longer, and each present.X
// output fed back as the past_key_values.X input.
func generate(ctx context.Context, g *exec.Graph, prompt map[string]*array.Array, n int) ([]int64, error) {
	feeds := maps.Clone(prompt)
	logits := g.Outputs()[0].Name
	tokens := make([]int64, 0, n)
	for range n {
		out, err := g.RunArrays(ctx, feeds)
		if err != nil {
			return nil, err
		}
		next, err := lastArgmax(out[logits])
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", logits, err)
		}
		tokens = append(tokens, next)
		mask := feeds["attention_mask"]
		if mask == nil || len(mask.Shape) != 2 {
			return nil, fmt.Errorf("input attention_mask: missing or not (batch, total_sequence)")
		}
		ones := make([]int64, mask.Shape[1]+1)
		for i := range ones {
			ones[i] = 1
		}
		feeds["input_ids"] = array.FromSlice([]int{1, 1}, []int64{next})
		feeds["attention_mask"] = array.FromSlice([]int{1, len(ones)}, ones)
		for name, v := range out {
			if layer, ok := strings.CutPrefix(name, "present."); ok {
				feeds["past_key_values."+layer] = v
			}
		}
	}
	return tokens, nil
}

// lastArgmax is the index of the largest logit of the last position of a
// (1, T, vocabulary) tensor, the first of equals.
func lastArgmax(a *array.Array) (int64, error) {
	data, ok := a.Data.([]float32)
	if !ok || len(a.Shape) != 3 || a.Shape[0] != 1 || a.Shape[1] == 0 || a.Shape[2] == 0 {
		return 0, fmt.Errorf("%s %v, want float32 (1, T, vocabulary)", a.DType, a.Shape)
	}
	row := data[len(data)-a.Shape[2]:]
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return int64(best), nil
}
