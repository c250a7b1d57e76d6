package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
)

// The timed run must compute the model: its first output is held against
// PyTorch's before timing. The bound is loose next to the cross-checks'
// (1e-5 relative, 1e-6 absolute, in testdata/pytorch2) because these are
// whole models of 6 layers in float32, where PyTorch's and any other
// engine's rounding differ by up to 2e-5 (known_failures.txt, MiniLM); it
// still catches a wrong input order, a wrong cache or a wrong graph.
const (
	checkRelative = 1e-4
	checkAbsolute = 1e-4
)

// BenchmarkExecutor times one forward pass of attnrun's graph executor on
// each shape the export wrote: ATTNRUN_BENCH_MODELS/<model>/model.onnx run
// on <model>/<shape>/test_data_set_0's inputs (one decoding step of the
// Llama-style decoder at past 128, 512 and 2048; MiniLM at B=1, T=32 and
// B=32, T=128). Besides ns/op it reports the median and p10 latency in ms
// of the last round of b.N runs, and max_abs_diff, the check against
// PyTorch's first output.
//
//	ATTNRUN_BENCH_MODELS=~/.cache/attnrun/bench go test ./bench -run '^$' \
//	    -bench 'Executor/llama/past_128$' -cpu 2 -benchtime 2s -benchmem
func BenchmarkExecutor(b *testing.B) {
	root := os.Getenv("ATTNRUN_BENCH_MODELS")
	if root == "" {
		b.Skip("ATTNRUN_BENCH_MODELS is not set: run testdata/bench_models/models_bench.py export --out DIR and set it to DIR")
	}
	models, err := filepath.Glob(filepath.Join(root, "*", "model.onnx"))
	if err != nil || len(models) == 0 {
		b.Fatalf("no %s/*/model.onnx (%v): run testdata/bench_models/models_bench.py export --out %s", root, err, root)
	}
	for _, model := range models {
		dir := filepath.Dir(model)
		b.Run(filepath.Base(dir), func(b *testing.B) {
			sets, err := filepath.Glob(filepath.Join(dir, "*", "test_data_set_0"))
			if err != nil {
				b.Fatal(err)
			}
			var g *exec.Graph // prepared once, on the first shape asked for
			for _, set := range sets {
				shape := filepath.Base(filepath.Dir(set))
				if strings.HasPrefix(shape, "greedy_") {
					continue // BenchmarkGreedy's
				}
				b.Run(shape, func(b *testing.B) {
					if g == nil {
						if g, err = prepare(model); err != nil {
							b.Fatal(err)
						}
					}
					benchmarkSet(b, g, set)
				})
			}
		})
	}
}

// prepare reads and prepares an ONNX file for the executor.
func prepare(path string) (*exec.Graph, error) {
	m, err := onnxio.ReadModel(path)
	if err != nil {
		return nil, err
	}
	g, err := exec.New(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

func benchmarkSet(b *testing.B, g *exec.Graph, set string) {
	feeds, want, err := readSet(g, set)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	first := g.Outputs()[0].Name
	out, err := g.RunArrays(ctx, feeds)
	if err != nil {
		b.Fatalf("%s: %v", set, err)
	}
	diff, err := checkClose(out[first], want)
	if err != nil {
		b.Fatalf("%s: output %s: %v", set, first, err)
	}
	b.ReportAllocs()
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := g.RunArrays(ctx, feeds); err != nil {
			b.Fatalf("%s: %v", set, err)
		}
		times = append(times, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(quantileMS(times, 0.5), "median-ms")
	b.ReportMetric(quantileMS(times, 0.1), "p10-ms")
	b.ReportMetric(diff, "max_abs_diff")
}

// readSet reads a test-data set: input_K.pb feeds the graph's K-th input,
// output_0.pb is PyTorch's first output.
func readSet(g *exec.Graph, dir string) (map[string]*array.Array, *array.Array, error) {
	inputs, outputs, err := onnxio.ReadDataSetArrays(dir)
	if err != nil {
		return nil, nil, err
	}
	names := g.Inputs()
	if len(inputs) != len(names) || len(outputs) == 0 {
		return nil, nil, fmt.Errorf("%s: %d inputs and %d outputs, want %d inputs (the graph's) and at least one output",
			dir, len(inputs), len(outputs), len(names))
	}
	feeds := make(map[string]*array.Array, len(names))
	for k, in := range names {
		feeds[in.Name] = inputs[k]
	}
	return feeds, outputs[0], nil
}

// checkClose returns the largest absolute difference of got from want, or
// an error when an element is further than checkAbsolute + checkRelative·|want|
// (NaN counts as far) or the shapes differ.
func checkClose(got, want *array.Array) (float64, error) {
	if !slices.Equal(got.Shape, want.Shape) {
		return 0, fmt.Errorf("shape %v, PyTorch's is %v", got.Shape, want.Shape)
	}
	g, ok1 := got.Data.([]float32)
	w, ok2 := want.Data.([]float32)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("types %s and %s, want float32", got.DType, want.DType)
	}
	worst := 0.0
	for i := range g {
		d := math.Abs(float64(g[i]) - float64(w[i]))
		if !(d <= checkAbsolute+checkRelative*math.Abs(float64(w[i]))) {
			return d, fmt.Errorf("element %d is %g, PyTorch's %g (|diff| %.3g > %g + %g·|want|)",
				i, g[i], w[i], d, checkAbsolute, checkRelative)
		}
		worst = max(worst, d)
	}
	return worst, nil
}

// quantileMS interpolates linearly between the closest ranks of sorted
// durations (numpy's default, as attnrun bench and the Python timings do).
func quantileMS(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	v := float64(sorted[i])
	if i+1 < len(sorted) {
		v += (pos - float64(i)) * float64(sorted[i+1]-sorted[i])
	}
	return v / 1e6
}
