package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
)

// benchCommand runs `attnrun bench` in-process, built on its own like
// plotCommand, and returns its output.
func benchCommand(args ...string) (string, error) {
	cmd := newBenchCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), err
}

var lastLine = regexp.MustCompile(`^median_ms=([0-9]+\.[0-9]+) gflops=([0-9]+\.[0-9]+) allocs_op=[0-9]+\.[0-9] bytes_op=[0-9]+$`)

// checkBenchOutput asserts the report's shape and returns the numbers of
// its last line.
func checkBenchOutput(t *testing.T, out string, timed int) (medianMS, gflops float64) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	m := lastLine.FindStringSubmatch(lines[len(lines)-1])
	require.NotNil(t, m, "last line %q", lines[len(lines)-1])
	medianMS, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	gflops, err = strconv.ParseFloat(m[2], 64)
	require.NoError(t, err)
	assert.Greater(t, medianMS, 0.0)
	assert.Contains(t, out, " "+strconv.Itoa(timed)+" timed")
	assert.Regexp(t, `latency  median [0-9.]+ ms, min [0-9.]+, p10 [0-9.]+, p90 [0-9.]+, max [0-9.]+ ms`, out)
	assert.Regexp(t, `memory   peak RSS [0-9.]+ MiB`, out)
	return medianMS, gflops
}

// writeConfig writes a model config into a test directory.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o644))
	return path
}

const benchMHA = `name: mha
layers:
  - {name: attn, type: attention.multihead, d_in: 16, d_out: 16, context_length: 32, num_heads: 2}
`

// mhaFlops is the work of benchMHA at (2, 8, 16): Q, K, V and out_proj are
// 2·16 tokens·16·16 each; the attention products 2·B·H·T·T·(dk+dv).
const mhaFlops = 4*2*(2*8)*16*16 + 2*2*2*8*8*(8+8)

func TestBenchConfig(t *testing.T) {
	out, err := benchCommand(writeConfig(t, benchMHA), "--shape", "2,8,16", "--iters", "4", "--warmup", "1")
	require.NoError(t, err)
	medianMS, gflops := checkBenchOutput(t, out, 4)
	assert.Contains(t, out, `"mha" on attnrun's layers`)
	assert.Contains(t, out, "input    x float32 (2, 8, 16), seed 0")
	assert.Contains(t, out, "runs     1 warm-up, 4 timed\n")
	assert.Contains(t, out, "40960 FLOP per forward pass")
	// The last line's rate is the counted work over the median, to the
	// printed precision.
	// The median is printed to 1e-4 ms.
	assert.InEpsilon(t, mhaFlops/(medianMS*1e-3)/1e9, gflops, 1e-3+0.5e-4/medianMS)
}

func TestBenchAutomaticIterations(t *testing.T) {
	out, err := benchCommand("seed-mha-wrapper", "--shape", "2,6,3", "--time", "1ns", "--warmup", "0")
	require.NoError(t, err)
	checkBenchOutput(t, out, minAutoIters)
	assert.Contains(t, out, "runs     0 warm-up, 3 timed (automatic: --time 1ns)")
}

func TestBenchThreadsSetsGOMAXPROCS(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	out, err := benchCommand("seed-mha-wrapper", "--shape", "1,4,3", "--iters", "3", "--threads", "1")
	require.NoError(t, err)
	assert.Contains(t, out, "threads  1 (GOMAXPROCS)")
	assert.Equal(t, before, runtime.GOMAXPROCS(0), "bench restores GOMAXPROCS")
}

// TestBenchONNX runs a PyTorch export on the executor, and an attnrun
// export on the layers (and on the executor when asked): the two ways of
// counting work agree.
func TestBenchONNX(t *testing.T) {
	pytorch := "../../../testdata/onnx/multihead_opset17_dynamic/model.onnx"
	out, err := benchCommand(pytorch, "--shape", "2,6,8", "--iters", "3", "--warmup", "1")
	require.NoError(t, err)
	checkBenchOutput(t, out, 3)
	assert.Contains(t, out, "on attnrun's graph executor")
	// MultiHeadAttention(8, 8, 8, 2) at (2, 6, 8): four 8×8 projections of 12
	// tokens, and Q·Kᵀ, P·V for 2 sequences × 2 heads of width 4.
	assert.Contains(t, out, "8448 FLOP per forward pass (matrix products, attention over all T×T pairs), counted on the graph's MatMul and Gemm nodes")

	m, err := models.Parse([]byte(benchMHA), "mha.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(1))
	pb, err := export.Model(m, export.Options{})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "mha.onnx")
	require.NoError(t, onnxio.WriteModel(path, pb))

	out, err = benchCommand(path, "--shape", "2,8,16", "--iters", "3")
	require.NoError(t, err)
	checkBenchOutput(t, out, 3)
	assert.Contains(t, out, `"mha" on attnrun's layers, from `+path+" (attnrun export)")
	assert.Contains(t, out, "40960 FLOP per forward pass (matrix products, attention over all T×T pairs), counted by the layers")

	out, err = benchCommand(path, "--shape", "2,8,16", "--iters", "3", "--executor")
	require.NoError(t, err)
	checkBenchOutput(t, out, 3)
	assert.Contains(t, out, "on attnrun's graph executor")
	assert.Contains(t, out, "40960 FLOP per forward pass (matrix products, attention over all T×T pairs), counted on the graph's MatMul and Gemm nodes")

	out, err = benchCommand(writeConfig(t, benchMHA), "--shape", "2,8,16", "--iters", "3", "--executor")
	require.NoError(t, err)
	assert.Contains(t, out, `"mha" exported to ONNX on attnrun's graph executor`)
	assert.Contains(t, out, "40960 FLOP per forward pass (matrix products, attention over all T×T pairs), counted on the graph's MatMul and Gemm nodes")
}

// TestBenchDataSetInputs benchmarks a Hugging Face BERT export on its
// test-data set (int64 ids, token types and attention mask), on the
// executor and lifted onto the layers, where random float32 inputs of
// --shape cannot feed it.
func TestBenchDataSetInputs(t *testing.T) {
	fixture := "../../../testdata/pytorch2/fixtures/bert_sdpa_ts17"
	data := filepath.Join(fixture, "test_data_set_0")
	out, err := benchCommand(filepath.Join(fixture, "model.onnx"), "--inputs", data, "--iters", "3", "--warmup", "1")
	require.NoError(t, err)
	checkBenchOutput(t, out, 3)
	assert.Contains(t, out, "on attnrun's graph executor")
	assert.Contains(t, out, "work     1.426 MFLOP per forward pass (matrix products, attention over all T×T pairs), counted on the graph's MatMul and Gemm nodes")
	assert.Regexp(t, `input    input_ids int64 \(2, 7\), attention_mask int64 \(2, 7\), token_type_ids int64 \(2, 7\), from `+regexp.QuoteMeta(data)+"\n", out)

	lifted := filepath.Join(t.TempDir(), "bert.onnx")
	status, _, stderr := attnrun("import", filepath.Join(fixture, "model.onnx"), "-o", lifted)
	require.Equal(t, 0, status, stderr)
	out, err = benchCommand(lifted, "--inputs", data, "--iters", "3", "--warmup", "1")
	require.NoError(t, err)
	checkBenchOutput(t, out, 3)
	assert.Contains(t, out, "on attnrun's layers, from "+lifted+" (attnrun export)")
	// The layers' count agrees with the executor's count of the graph's
	// MatMul and Gemm nodes.
	assert.Contains(t, out, "work     1.426 MFLOP per forward pass (matrix products, attention over all T×T pairs), counted by the layers")

	_, err = benchCommand(lifted, "--shape", "2,7,32", "--iters", "1")
	require.ErrorContains(t, err, `input "input_ids" is int64: bench feeds float32 inputs of --shape; --inputs DIR feeds a test-data set's`)
	_, err = benchCommand(filepath.Join(fixture, "model.onnx"), "--shape", "2,7,32", "--iters", "1")
	require.ErrorContains(t, err, "bench feeds float32 inputs of --shape, this one is int64; --inputs DIR feeds a test-data set's")
	_, err = benchCommand("../../../testdata/onnx/multihead_opset17_dynamic/model.onnx", "--inputs", data, "--iters", "1")
	require.ErrorContains(t, err, "--inputs "+data+": 3 input file(s), the model takes 1")
	_, err = benchCommand(lifted, "--inputs", t.TempDir(), "--iters", "1")
	require.ErrorContains(t, err, "no input_K.pb or output_K.pb files")
}

// TestBenchProfiles writes the CPU and allocation profiles bench is asked
// for: gzipped protobuf files that go tool pprof reads.
func TestBenchProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	out, err := benchCommand(writeConfig(t, benchMHA), "--shape", "2,8,16", "--iters", "3", "--cpuprofile", cpu, "--memprofile", mem)
	require.NoError(t, err)
	checkBenchOutput(t, out, 3)
	for _, path := range []string{cpu, mem} {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Greater(t, len(data), 2, path)
		assert.Equal(t, []byte{0x1f, 0x8b}, data[:2], "%s is gzipped, as pprof writes", path)
	}
	_, err = benchCommand(writeConfig(t, benchMHA), "--shape", "2,8,16", "--iters", "1", "--cpuprofile", filepath.Join(dir, "no", "such", "dir", "cpu.prof"))
	require.ErrorContains(t, err, "--cpuprofile")
}

func TestBenchErrors(t *testing.T) {
	config := writeConfig(t, benchMHA)
	cases := []struct {
		name  string
		args  []string
		usage bool
		want  string
	}{
		{"no shape", []string{config}, true, `--shape "": missing; want B,T,D`},
		{"two dims", []string{config, "--shape", "8,16"}, true, `--shape "8,16": 2 dimension(s)`},
		{"four dims", []string{config, "--shape", "1,2,8,16"}, true, "4 dimension(s)"},
		{"not a number", []string{config, "--shape", "2,x,16"}, true, `"x" is not a positive integer`},
		{"zero", []string{config, "--shape", "0,8,16"}, true, `"0" is not a positive integer`},
		{"negative", []string{config, "--shape", "2,-8,16"}, true, `"-8" is not a positive integer`},
		{"too large", []string{config, "--shape", "1024,1024,1025"}, true, "more than 268435456 elements"},
		{"iters", []string{config, "--shape", "2,8,16", "--iters", "-1"}, true, "--iters -1"},
		{"warmup", []string{config, "--shape", "2,8,16", "--warmup", "-2"}, true, "--warmup -2"},
		{"threads", []string{config, "--shape", "2,8,16", "--threads", "-1"}, true, "--threads -1"},
		{"time", []string{config, "--shape", "2,8,16", "--time", "0s"}, true, "--time 0s"},
		{"weights on onnx", []string{"m.onnx", "--shape", "2,8,16", "--weights", "w.npz"}, true, "--weights applies to configs"},
		{"shape and inputs", []string{config, "--shape", "2,8,16", "--inputs", "set"}, true, "--shape and --inputs: give one"},
		{"inputs of an exported config", []string{config, "--inputs", "set", "--executor"}, true, "--inputs with --executor runs ONNX files"},
		{"no model", []string{"--shape", "2,8,16"}, true, "bench needs one argument"},
		{"unknown preset", []string{"no-such-preset", "--shape", "2,8,16"}, false, "no-such-preset"},
		{"wrong width", []string{config, "--shape", "2,8,15"}, false, "15"},
		{"too long", []string{config, "--shape", "1,33,16", "--iters", "1"}, false, "context_length"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := benchCommand(c.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			var u usageError
			assert.Equal(t, c.usage, errors.As(err, &u), "usage error: %v", err)
		})
	}
}

// TestModelFlops checks the count of issue 5's model (12.9 GFLOP, attention
// over all T×T pairs) and that a layer without a count is named.
func TestModelFlops(t *testing.T) {
	m, err := models.Parse([]byte(`name: m
layers:
  - {name: a, type: attention.multihead, d_in: 768, d_out: 768, context_length: 512, num_heads: 12}
  - {name: custom, type: clitest.bare}
`), "m.yaml")
	require.NoError(t, err)
	got, err := modelFlops(m, tensor.Shape{4, 512, 768})
	require.NoError(t, err)
	// Q, K, V and out_proj on 2048 tokens; Q·Kᵀ and weights·V for 4·12 heads.
	assert.Equal(t, float64(4*2*2048*768*768+2*4*12*512*512*(64+64)), got.total)
	assert.Equal(t, []string{"custom"}, got.missed)

	out, err := benchCommand(writeConfig(t, strings.Replace(benchMHA, "layers:\n", "layers:\n  - {name: custom, type: clitest.bare}\n", 1)),
		"--shape", "2,8,16", "--iters", "3")
	require.NoError(t, err)
	assert.Contains(t, out, "40960 FLOP per forward pass (matrix products, attention over all T×T pairs), counted by the layers as attnrun inspect does; not counted: custom\n")
}

func TestSummarize(t *testing.T) {
	ms := func(v ...float64) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x * float64(time.Millisecond))
		}
		return out
	}
	// numpy.percentile([5, 1, 4, 2, 3], [10, 50, 90]) = [1.4, 3, 4.6].
	got := summarize(ms(5, 1, 4, 2, 3))
	assert.Equal(t, latencyStats{min: ms(1)[0], p10: ms(1.4)[0], median: ms(3)[0], p90: ms(4.6)[0], max: ms(5)[0]}, got)
	// An even count's median is the mean of the middle two.
	assert.Equal(t, ms(2.5)[0], summarize(ms(4, 1, 3, 2)).median)
	assert.Equal(t, ms(7)[0], summarize(ms(7)).p90)
}

func TestBenchInputsAreDeterministic(t *testing.T) {
	a := benchInputs([]string{"x", "y"}, []int{2, 3, 4}, 7)
	b := benchInputs([]string{"x", "y"}, []int{2, 3, 4}, 7)
	c := benchInputs([]string{"x"}, []int{2, 3, 4}, 8)
	require.Len(t, a, 2)
	assert.Equal(t, tensor.Shape{2, 3, 4}, a[0].Shape())
	assert.Equal(t, a[0].Data(), b[0].Data())
	assert.Equal(t, a[1].Data(), b[1].Data())
	assert.NotEqual(t, a[0].Data(), a[1].Data(), "each input gets its own numbers")
	assert.NotEqual(t, a[0].Data(), c[0].Data(), "the seed changes the numbers")
}

func TestStatusBytes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/self/status is Linux's")
	}
	rss, err := statusBytes("VmRSS")
	require.NoError(t, err)
	peak, err := statusBytes("VmHWM")
	require.NoError(t, err)
	assert.Greater(t, rss, uint64(1<<20))
	assert.GreaterOrEqual(t, peak, rss)
	_, err = statusBytes("VmNothing")
	assert.ErrorContains(t, err, "no VmNothing line")
}
