package exec

import (
	"context"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
)

// The fuzzer's limits: small enough that a run that ignores them shows
// (a budget far below the machine's memory, a deadline far below the
// fuzzer's own timeouts), large enough for real attention graphs.
const (
	fuzzMemory   = 64 << 20
	fuzzDeadline = 2 * time.Second
	// fuzzGrace is how long past its deadline a run may take to notice it:
	// the work of one GEMM part, one attention chunk or one elementwise
	// node (milliseconds to a fraction of a second), with room for a
	// loaded machine.
	fuzzGrace = 2 * time.Second
	// fuzzInputElements bounds each input the fuzzer feeds.
	fuzzInputElements = 1 << 16
)

// fuzzLimits decode at most a megabyte, with no external data (DecodeModel
// is given no directory).
var fuzzLimits = onnxio.Limits{MaxFileBytes: 1 << 20, MaxTensorBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxDims: 16}

// FuzzExecutor decodes arbitrary bytes as a model, prepares it and runs it
// on random inputs (drawn from a seed derived from the bytes) under a 64 MiB
// budget and a 2 s deadline. Any error is fine except a recovered panic
// ("internal error"); a run must also end soon after its deadline.
//
// The corpus, testdata/fuzz/FuzzExecutor, holds the hostile models of
// issue 10 and small exports of the repository (TestWriteFuzzCorpus writes
// it), and every finding, each of which is also a regression test here.
//
//	go test ./onnxio/exec -run '^$' -fuzz '^FuzzExecutor$' -fuzztime 10m -parallel 1
func FuzzExecutor(f *testing.F) {
	f.Fuzz(runFuzzOnce)
}

// runFuzzOnce is one input of FuzzExecutor.
func runFuzzOnce(t *testing.T, data []byte) {
	m, err := onnxio.DecodeModel(data, "", fuzzLimits)
	if err != nil {
		return
	}
	g, err := NewWithOptions(m, Options{MaxMemory: fuzzMemory})
	if err != nil {
		checkFuzzError(t, err)
		return
	}
	feeds, ok := fuzzInputs(g, data)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), fuzzDeadline)
	defer cancel()
	start := time.Now()
	_, err = g.RunContext(ctx, feeds)
	if took := time.Since(start); took > fuzzDeadline+fuzzGrace {
		t.Fatalf("the run took %v under a deadline of %v (error: %v)", took, fuzzDeadline, err)
	}
	checkFuzzError(t, err)
}

// checkFuzzError fails on errors that must never reach a user.
func checkFuzzError(t *testing.T, err error) {
	if err != nil && strings.Contains(err.Error(), "internal error") {
		t.Fatal(err)
	}
}

// fuzzInputs makes an input for every graph input: declared sizes where
// fixed, 1 to 4 per symbolic name otherwise (the same for every use of a
// name), and values from a generator seeded by the model's bytes: small
// numbers mostly (they make valid indices and shapes), and now and then
// 0, extremes, NaN and infinities. It reports false when a declared input
// is too large to feed.
func fuzzInputs(g *Graph, data []byte) (map[string]*tensor.Dense, bool) {
	h := fnv.New64a()
	h.Write(data)
	rng := rand.New(rand.NewPCG(h.Sum64(), uint64(len(data))))
	sizes := map[string]int{}
	feeds := map[string]*tensor.Dense{}
	for _, info := range g.Inputs() {
		shape := make([]int, 0, len(info.Shape))
		if info.Shape == nil {
			for range rng.IntN(4) {
				shape = append(shape, 1+rng.IntN(4))
			}
		}
		for _, d := range info.Shape {
			switch {
			case d.Known:
				if d.Value < 1 || d.Value > fuzzInputElements {
					return nil, false // *tensor.Dense holds no empty tensor
				}
				shape = append(shape, int(d.Value))
			case d.Param != "":
				if _, ok := sizes[d.Param]; !ok {
					sizes[d.Param] = 1 + rng.IntN(4)
				}
				shape = append(shape, sizes[d.Param])
			default:
				shape = append(shape, 1+rng.IntN(4))
			}
		}
		n := numel(shape)
		if n > fuzzInputElements {
			return nil, false
		}
		backing := fuzzData(rng, info.DType, n)
		if backing == nil {
			return nil, false
		}
		feeds[info.Name] = wrapDense(shape, backing)
	}
	return feeds, true
}

// fuzzData returns n random elements of type dt, or nil for a type the
// executor does not take.
func fuzzData(rng *rand.Rand, dt DType, n int) any {
	special := []float64{0, math.Copysign(0, -1), 1, -1, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat32, -math.MaxInt64, math.MaxInt64}
	draw := func() float64 {
		switch r := rng.IntN(16); {
		case r == 0:
			return special[rng.IntN(len(special))]
		case r < 8:
			return float64(rng.IntN(9) - 3) // small integers: indices, shapes, axes
		default:
			return rng.NormFloat64() * 3
		}
	}
	if dt == Bool {
		s := make([]bool, n)
		for i := range s {
			s[i] = rng.IntN(2) == 1
		}
		return s
	}
	if !dt.Supported() {
		return nil
	}
	f := make([]float64, n)
	for i := range f {
		f[i] = draw()
		if !dt.IsFloat() && (math.IsNaN(f[i]) || math.IsInf(f[i], 0)) {
			f[i] = 0
		}
	}
	out := makeSlice(dt, n)
	convertData(out, f)
	return out
}

// fuzzCorpus is the directory of FuzzExecutor's corpus.
var fuzzCorpus = filepath.Join("testdata", "fuzz", "FuzzExecutor")

// corpusModels are the repository's small exports the corpus starts from,
// relative to this package: attention graphs of several shapes and opsets.
var corpusModels = []string{
	"../lift/testdata/simple_static/model.onnx",
	"../lift/testdata/simple_dynamic/model.onnx",
	"../lift/testdata/simple_scaled_causal_dynamic/model.onnx",
	"../lift/testdata/self_causal_unscaled_dynamic/model.onnx",
	"../lift/testdata/attention_op_4d/model.onnx",
	"../../testdata/onnx/causal_average_opset17_dynamic/model.onnx",
	"../../testdata/onnx/self_attention_matrix_opset13_dynamic/model.onnx",
	"../../testdata/onnx/positional_self_attention_opset17_dynamic/model.onnx",
	"../../testdata/onnx/causal_attention_opset14_dynamic/model.onnx",
	"../../testdata/onnx/multihead_opset17_static/model.onnx",
	"../../testdata/onnx/multihead_wrapper_opset13_dynamic/model.onnx",
	"testdata/attention/attn23_causal/model.onnx",
	"testdata/attention/attn23_mask_bool_past_causal_3d/model.onnx",
	"testdata/attention/attn23_3d_gqa_present/model.onnx",
}

// corpusSeeds returns the corpus's seeds by file name: the hostile models,
// an int32 product, and the exports.
func corpusSeeds(t *testing.T) map[string][]byte {
	seeds := map[string][]byte{}
	for _, c := range hostileCases(t) {
		data, err := onnxio.EncodeModel(c.model)
		require.NoError(t, err)
		seeds["hostile-"+strings.ReplaceAll(c.name, " ", "-")] = data
	}
	// The product of issue 10 in int32, small: mutating its shape's bytes
	// makes the runs that only the deadline stops (a seed that always ran
	// for the whole deadline would take most of the fuzzer's time).
	slow := squareMatMul(t, 256)
	slow.GetGraph().GetNode()[0] = filled(t, "a", "shape", dense([]int{1}, int32(1)))
	slow.GetGraph().GetOutput()[0] = untyped("y", onnxio.Int32)
	data, err := onnxio.EncodeModel(slow)
	require.NoError(t, err)
	seeds["hostile-int32-matmul"] = data
	for _, path := range corpusModels {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		// "../lift/testdata/simple_static/model.onnx": "model-lift-simple_static"
		name := strings.NewReplacer("../", "", "testdata/", "", "/model.onnx", "", "/", "-").Replace(path)
		seeds["model-"+name] = data
	}
	return seeds
}

// corpusFile is a seed in the format of go test's corpus files.
func corpusFile(data []byte) string {
	return "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
}

// TestWriteFuzzCorpus writes the seeds into the corpus when
// ATTNRUN_WRITE_FUZZ_CORPUS is set, and otherwise checks that the corpus
// holds them as written.
//
//	ATTNRUN_WRITE_FUZZ_CORPUS=1 go test ./onnxio/exec -run TestWriteFuzzCorpus
func TestWriteFuzzCorpus(t *testing.T) {
	write := os.Getenv("ATTNRUN_WRITE_FUZZ_CORPUS") != ""
	if write {
		require.NoError(t, os.MkdirAll(fuzzCorpus, 0o755))
	}
	for name, data := range corpusSeeds(t) {
		path := filepath.Join(fuzzCorpus, "seed-"+name)
		if write {
			require.NoError(t, os.WriteFile(path, []byte(corpusFile(data)), 0o644))
			continue
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "regenerate the corpus: ATTNRUN_WRITE_FUZZ_CORPUS=1 go test ./onnxio/exec -run TestWriteFuzzCorpus")
		require.Equal(t, corpusFile(data), string(got), "%s is stale; regenerate the corpus", path)
	}
}
