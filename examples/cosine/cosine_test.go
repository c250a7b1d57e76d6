package cosine_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/cmd/attnrun/cli"
	"github.com/attnrun/attnrun/examples/cosine"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/registry"
	"github.com/attnrun/attnrun/tensorio"
)

// Float32 agreement with PyTorch's output.
const (
	torchAbs = 1e-6
	torchRel = 1e-5
)

// torchSeed is SEED in testdata/reference.py: the weights in the .npz files
// are what torch.manual_seed(torchSeed) drew when building each model.
const torchSeed = 2024

// cases are the models testdata/reference.py runs in PyTorch; for each
// name there are testdata/<name>.yaml, _weights.npz, _input.npy,
// _expected.npy and _attention.npy.
var cases = []string{"cosine", "noncausal"}

// TestMatchesPyTorch loads each model config with PyTorch's weights, runs
// it on PyTorch's input and compares the output and the attention weights
// the layer reports with PyTorch's.
func TestMatchesPyTorch(t *testing.T) {
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			m := load(t, name)
			require.NoError(t, m.LoadWeights(testdata(name+"_weights.npz")))
			out, weights := forward(t, m, readNPY(t, name+"_input.npy"))
			assertClose(t, readNPY(t, name+"_expected.npy"), out, "output")
			require.NotNil(t, weights, "the hook received no attention weights")
			assertClose(t, readNPY(t, name+"_attention.npy"), weights, "attention weights")
		})
	}
}

// TestSeededInitMatchesPyTorch checks that Init draws exactly the weights
// PyTorch drew after torch.manual_seed: the layer lists its parameters in
// the module's creation order with nn.Linear's init.
func TestSeededInitMatchesPyTorch(t *testing.T) {
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			m := load(t, name)
			require.NoError(t, m.Init(torchSeed))
			wantNames, wantTensors, err := tensorio.ReadNPZ(testdata(name + "_weights.npz"))
			require.NoError(t, err)
			gotNames, got := m.StateDict()
			require.Equal(t, wantNames, gotNames, "parameter names in state_dict order")
			for i, n := range wantNames {
				require.Equal(t, wantTensors[i].Shape(), got[n].Shape(), n)
				assert.Equal(t, wantTensors[i].Data(), got[n].Data(), "%s drawn after torch.manual_seed(%d)", n, torchSeed)
			}
			out, _ := forward(t, m, readNPY(t, name+"_input.npy"))
			assertClose(t, readNPY(t, name+"_expected.npy"), out, "output")
		})
	}
}

// TestZeroVectorFollowsFNormalize pins the eps semantics: token 2 of the
// noncausal input is zero, so with no bias its query and key are zero.
// F.normalize keeps them zero, so that query scores 0 against every key
// and attends uniformly, and that key scores 0 for every query.
func TestZeroVectorFollowsFNormalize(t *testing.T) {
	m := load(t, "noncausal")
	require.NoError(t, m.LoadWeights(testdata("noncausal_weights.npz")))
	_, weights := forward(t, m, readNPY(t, "noncausal_input.npy"))
	w := floats(weights)
	const tokens = 6
	for j := 0; j < tokens; j++ {
		assert.InDelta(t, 1.0/tokens, w[2*tokens+j], 1e-7, "query 2 attends uniformly")
	}
	// Key 2's score is 0, so its weight in row i is exp(0 - max) / sum:
	// positive and finite, never NaN.
	for i := 0; i < tokens; i++ {
		assert.Greater(t, w[i*tokens+2], float32(0), "row %d, key 2", i)
	}
}

// TestBatchedEqualsPerSample runs a batch and each of its sequences alone
// (as a (T, d) view into the batch) and expects the same numbers.
func TestBatchedEqualsPerSample(t *testing.T) {
	for _, name := range []string{"cosine", "noncausal"} {
		t.Run(name, func(t *testing.T) {
			m := load(t, name)
			require.NoError(t, m.Init(7))
			cfg := m.Config().Layers[0].Layer.(*cosine.Cosine)
			x := randomInput(3, 7, cfg.DIn)
			batched, batchedWeights := forward(t, m, x)
			require.Equal(t, 3, batched.Shape()[0])
			perRow := batched.Shape()[1] * batched.Shape()[2]
			for b := 0; b < 3; b++ {
				view, err := x.Slice(tensor.S(b))
				require.NoError(t, err)
				single, singleWeights := forward(t, m, view.(*tensor.Dense))
				require.Equal(t, []int{7, batched.Shape()[2]}, []int(single.Shape()), "a (T, d) input gives a (T, d') output")
				assert.Equal(t, floats(batched)[b*perRow:(b+1)*perRow], floats(single), "output of sequence %d", b)
				assert.Equal(t, floats(batchedWeights)[b*49:(b+1)*49], floats(singleWeights), "weights of sequence %d", b)
			}
		})
	}
}

// TestAttentionWeights checks the weights the layer reports: shape
// (B, 1, T, T), rows that sum to 1, zeros above the diagonal when causal.
func TestAttentionWeights(t *testing.T) {
	for _, causal := range []bool{false, true} {
		layer := &cosine.Cosine{DIn: 5, DOut: 4, Scale: 10, Causal: causal, QKVBias: true}
		require.NoError(t, layer.Validate())
		fill(layer.Params(), 3)
		var weights *tensor.Dense
		run := &registry.Run{Layer: "attn", Hook: func(layer string, w *tensor.Dense) {
			assert.Equal(t, "attn", layer)
			weights = w
		}}
		_, err := layer.Forward(run, []*tensor.Dense{randomInput(2, 9, 5)})
		require.NoError(t, err)
		require.Equal(t, []int{2, 1, 9, 9}, []int(weights.Shape()))
		w := floats(weights)
		for row := 0; row < 2*9; row++ {
			i := row % 9
			var sum float64
			for j := 0; j < 9; j++ {
				v := w[row*9+j]
				sum += float64(v)
				if causal && j > i {
					assert.Zero(t, v, "causal=%v: query %d sees future key %d", causal, i, j)
				} else {
					assert.Positive(t, v, "causal=%v: query %d, key %d", causal, i, j)
				}
			}
			assert.InDelta(t, 1, sum, 1e-6, "causal=%v: row %d sums to 1", causal, row)
		}

		// Without a hook the weights are not computed, and the output is the
		// same within float32 rounding: the fused kernel never forms the
		// weights and sums in another order.
		withHook, err := layer.Forward(run, []*tensor.Dense{randomInput(2, 9, 5)})
		require.NoError(t, err)
		plain, err := layer.Forward(&registry.Run{}, []*tensor.Dense{randomInput(2, 9, 5)})
		require.NoError(t, err)
		assertClose(t, withHook, plain, "output without a hook")
	}
}

// TestConcurrentForward runs one model from many goroutines on inputs of
// different shapes and expects what a lone pass gives: Forward keeps no
// state in the layer. Run with -race to check for data races too.
func TestConcurrentForward(t *testing.T) {
	m := load(t, "cosine")
	require.NoError(t, m.Init(1))
	inputs := []*tensor.Dense{randomInput(1, 3, 4), randomInput(2, 5, 4), randomInput(4, 8, 4)}
	want := make([][]float32, len(inputs))
	for i, x := range inputs {
		out, _ := forward(t, m, x)
		want[i] = floats(out)
	}
	var wg sync.WaitGroup
	got := make([][]float32, 8*len(inputs))
	errs := make([]error, len(got))
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := m.Forward(&registry.Run{Hook: func(string, *tensor.Dense) {}}, inputs[g%len(inputs)])
			if errs[g] = err; err == nil {
				got[g] = floats(out)
			}
		}()
	}
	wg.Wait()
	for g := range got {
		require.NoError(t, errs[g])
		assert.Equal(t, want[g%len(inputs)], got[g], "goroutine %d", g)
	}
}

// TestCommandLine drives the custom binary's command tree in-process: the
// layer is listed, and `run` prints and writes PyTorch's numbers.
func TestCommandLine(t *testing.T) {
	status, out, stderr := attnrun("layers")
	require.Equal(t, 0, status, stderr)
	assert.Regexp(t, `(?m)^attention\.cosine +single-head attention scored by scaled cosine similarity`, out)
	assert.Contains(t, out, "attention.multihead", "the built-in layers are still there")

	args := []string{"run", testdata("cosine.yaml"),
		"--weights", testdata("cosine_weights.npz"), "--input", testdata("cosine_input.npy")}
	expected := readNPY(t, "cosine_expected.npy")

	status, out, stderr = attnrun(args...)
	require.Equal(t, 0, status, stderr)
	assertPrinted(t, expected, out)

	path := filepath.Join(t.TempDir(), "y.npy")
	status, _, stderr = attnrun(append(args, "--output", path)...)
	require.Equal(t, 0, status, stderr)
	written, err := tensorio.ReadNPYFile(path)
	require.NoError(t, err)
	assertClose(t, expected, written, "--output")

	status, out, stderr = attnrun(append(args, "--attention", "attn")...)
	require.Equal(t, 0, status, stderr)
	assertPrinted(t, readNPY(t, "cosine_attention.npy"), out)
}

// TestConfigErrors checks strict decoding and Validate through a model
// config: each error names the file, line, layer, field and rule.
func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, fields, want string
	}{
		{"unknown field", "d_in: 4\n    d_out: 3\n    scal: 2",
			`bad.yaml:6: layer "attn" (attention.cosine): unknown field "scal" (fields: causal, d_in, d_out, qkv_bias, scale)`},
		{"wrong type", "d_in: four\n    d_out: 3",
			`bad.yaml:4: layer "attn" (attention.cosine): cannot unmarshal !!str ` + "`four`" + ` into int`},
		{"d_in", "d_in: 0\n    d_out: 3",
			`bad.yaml:3: layer "attn" (attention.cosine): d_in must be positive, got 0`},
		{"d_out", "d_in: 4\n    d_out: -3",
			`bad.yaml:3: layer "attn" (attention.cosine): d_out must be positive, got -3`},
		{"zero scale", "d_in: 4\n    d_out: 3\n    scale: 0",
			`bad.yaml:3: layer "attn" (attention.cosine): scale must be a finite number > 0, got 0`},
		{"negative scale", "d_in: 4\n    d_out: 3\n    scale: -1.5",
			`scale must be a finite number > 0, got -1.5`},
		{"NaN scale", "d_in: 4\n    d_out: 3\n    scale: .nan",
			`scale must be a finite number > 0, got NaN`},
		{"infinite scale", "d_in: 4\n    d_out: 3\n    scale: .inf",
			`scale must be a finite number > 0, got +Inf`},
		{"huge", "d_in: 100000\n    d_out: 100000",
			`projection weight of 100000 × 100000 exceed the limit`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config := "name: bad\nlayers:\n  - name: attn\n    " + tt.fields + "\n    type: attention.cosine\n"
			_, err := models.Parse([]byte(config), "bad.yaml")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestForwardErrors checks what Forward refuses, with the reason.
func TestForwardErrors(t *testing.T) {
	layer := &cosine.Cosine{DIn: 4, DOut: 3, Scale: 10}
	_, err := layer.Forward(&registry.Run{}, []*tensor.Dense{randomInput(1, 2, 4)})
	require.ErrorContains(t, err, "before a successful Validate")
	require.NoError(t, layer.Validate())

	tests := []struct {
		name   string
		inputs []*tensor.Dense
		want   string
	}{
		{"no input", nil, "takes 1 input, got 0"},
		{"two inputs", []*tensor.Dense{randomInput(1, 2, 4), randomInput(1, 2, 4)}, "takes 1 input, got 2"},
		{"nil", []*tensor.Dense{nil}, "input is nil"},
		{"d_in", []*tensor.Dense{randomInput(2, 3, 5)}, "d_in mismatch: input last dim 5, layer expects d_in 4"},
		{"rank", []*tensor.Dense{tensor.New(tensor.WithShape(4), tensor.WithBacking(make([]float32, 4)))}, "want (T, d_in) or (B, T, d_in)"},
		{"dtype", []*tensor.Dense{tensor.New(tensor.WithShape(2, 4), tensor.WithBacking(make([]float64, 8)))}, "input dtype float64: want float32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := layer.Forward(&registry.Run{}, tt.inputs)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// TestParams checks names, order, shapes and init schemes without a model.
func TestParams(t *testing.T) {
	layer := &cosine.Cosine{DIn: 4, DOut: 3, Scale: 10, QKVBias: true}
	require.Nil(t, layer.Params(), "no parameters before Validate")
	require.NoError(t, layer.Validate())
	var names []string
	for _, p := range layer.Params() {
		names = append(names, p.Name)
		if strings.HasSuffix(p.Name, ".weight") {
			assert.Equal(t, []int{3, 4}, []int(p.Value.Shape()), p.Name)
			assert.Equal(t, registry.LinearInit(4), p.Init, p.Name)
		} else {
			assert.Equal(t, []int{3}, []int(p.Value.Shape()), p.Name)
			assert.Equal(t, registry.LinearBiasInit(4), p.Init, p.Name)
		}
	}
	assert.Equal(t, []string{"W_query.weight", "W_query.bias", "W_key.weight", "W_key.bias", "W_value.weight", "W_value.bias"}, names)
}

// load builds testdata/<name>.yaml.
func load(t *testing.T, name string) *models.Model {
	t.Helper()
	m, err := models.Load(testdata(name + ".yaml"))
	require.NoError(t, err)
	return m
}

// forward runs m on x and returns its output and the weights attn reported.
func forward(t *testing.T, m *models.Model, x *tensor.Dense) (out, weights *tensor.Dense) {
	t.Helper()
	run := &registry.Run{Hook: func(layer string, w *tensor.Dense) {
		if layer == "attn" {
			weights = w
		}
	}}
	out, err := m.Forward(run, x)
	require.NoError(t, err)
	return out, weights
}

// attnrun runs the custom binary's command line in-process.
func attnrun(args ...string) (status int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	status = cli.Run(args, &out, &errOut)
	return status, out.String(), errOut.String()
}

func testdata(name string) string { return filepath.Join("testdata", name) }

func readNPY(t *testing.T, name string) *tensor.Dense {
	t.Helper()
	x, err := tensorio.ReadNPYFile(testdata(name))
	require.NoError(t, err)
	return x
}

func floats(t *tensor.Dense) []float32 { return t.Data().([]float32) }

// randomInput is a (b, t, d) tensor of N(0, 1) values from a fixed seed.
func randomInput(b, t, d int) *tensor.Dense {
	rng := rand.New(rand.NewPCG(uint64(b*1000+t), uint64(d)))
	data := make([]float32, b*t*d)
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	return tensor.New(tensor.WithShape(b, t, d), tensor.WithBacking(data))
}

// fill sets every parameter to U(-1, 1) values from a fixed seed.
func fill(params []registry.Param, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, p := range params {
		data := floats(p.Value)
		for i := range data {
			data[i] = float32(2*rng.Float64() - 1)
		}
	}
}

// assertClose compares shapes, then values within torchAbs + torchRel·|want|.
func assertClose(t *testing.T, want, got *tensor.Dense, what string) {
	t.Helper()
	require.Equal(t, []int(want.Shape()), []int(got.Shape()), "%s shape", what)
	g := floats(got)
	for i, w := range floats(want) {
		require.InDelta(t, w, g[i], torchAbs+torchRel*math.Abs(float64(w)), "%s[%d]", what, i)
	}
}

var printedNumber = regexp.MustCompile(`-?\d+\.\d*(e[-+]\d+)?`)

// assertPrinted checks that a tensor printed with 4 decimals shows want's values.
func assertPrinted(t *testing.T, want *tensor.Dense, printed string) {
	t.Helper()
	require.True(t, strings.HasPrefix(printed, "tensor("), "printed like PyTorch: %q", printed)
	numbers := printedNumber.FindAllString(printed, -1)
	require.Len(t, numbers, want.Shape().TotalSize(), "printed values in %q", printed)
	for i, w := range floats(want) {
		v, err := strconv.ParseFloat(numbers[i], 64)
		require.NoError(t, err)
		require.InDelta(t, w, v, 0.5e-4+1e-6, "printed value %d", i)
	}
}
