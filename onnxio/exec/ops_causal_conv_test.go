package exec

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
)

// causalConvCases is where testdata/causal_conv/generate.py wrote
// CausalConvWithState models with the outputs of ONNX's reference
// implementation (onnx 1.23.2).
const causalConvCases = "testdata/causal_conv"

// TestCausalConvAgainstReference runs every committed case and checks both
// outputs against ONNX's reference at rtol 1e-5, atol 1e-6.
func TestCausalConvAgainstReference(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(causalConvCases, "manifest.json"))
	require.NoError(t, err, "testdata/causal_conv/generate.py writes the cases")
	var manifest struct {
		Cases []struct{ Name, Covers string } `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(data, &manifest))
	require.NotEmpty(t, manifest.Cases)
	for _, c := range manifest.Cases {
		t.Run(c.Name, func(t *testing.T) {
			m, err := onnxio.ReadModel(filepath.Join(causalConvCases, c.Name, "model.onnx"))
			require.NoError(t, err)
			assert.NoError(t, runNodeTest(m, filepath.Join(causalConvCases, c.Name), tolerance{rtol: 1e-5, atol: 1e-6}), c.Covers)
		})
	}
}

// TestCausalConvConformance runs ONNX's node tests of CausalConvWithState:
// the float32 tests of the op itself must pass at rtol 1e-5, atol 1e-7;
// the float16 ones and the expanded graphs (which need Conv) must pass
// too once New accepts them.
func TestCausalConvConformance(t *testing.T) {
	if _, err := os.Stat(sharedNodeTests); err != nil {
		t.Skipf("ONNX node tests not found at %s (../shared/conformance)", sharedNodeTests)
	}
	dirs, err := filepath.Glob(filepath.Join(sharedNodeTests, "test_causal_conv_with_state*"))
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	passed := 0
	for _, dir := range dirs {
		name := filepath.Base(dir)
		m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
		require.NoError(t, err, name)
		mustRun := !strings.HasSuffix(name, "_expanded") && !strings.Contains(name, "fp16")
		if _, err := New(m); err != nil && !mustRun {
			reason, _, _ := strings.Cut(err.Error(), "; supported:")
			t.Logf("%s: not run: %s", name, reason)
			continue
		}
		if assert.NoError(t, runNodeTest(m, dir, strict32), name) {
			passed++
		}
	}
	t.Logf("%d of %d CausalConvWithState node tests pass", passed, len(dirs))
	assert.GreaterOrEqual(t, passed, 11) // every float32 test of the op
}

// A sequence fed in pieces, each piece's present_state the next one's
// past_state, gives the outputs and the final state of the whole: for
// pieces shorter and longer than the state, with and without a first
// state, bias and SiLU.
func TestCausalConvPiecesEqualWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 1))
	normal := func(shape ...int) *value {
		data := make([]float32, numel(shape))
		for i := range data {
			data[i] = float32(r.NormFloat64())
		}
		return valueOf(shape, data)
	}
	const batch, channels, length, k = 2, 3, 11, 4
	x, w, bias, past := normal(batch, channels, length), normal(channels, 1, k), normal(channels), normal(batch, channels, k-1)
	for _, silu := range []bool{false, true} {
		n := &node{op: "CausalConvWithState", opset: 27, spec: ops["CausalConvWithState"], attrs: attrs{}, out: []int{0, 1}}
		if silu {
			n.attrs["activation"] = attribute{kind: attrString, s: "silu"}
		}
		run := func(x, state *value) (y, present *value) {
			out, err := n.spec.run(testRun, n, []*value{x, w, bias, state})
			require.NoError(t, err)
			return out[0], out[1]
		}
		for _, first := range []*value{nil, past} {
			wantY, wantState := run(x, first)
			for _, cuts := range [][]int{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 7}, {5}} {
				state, from := first, 0
				gotY := make([]float32, 0, numel(x.shape))
				pieces := make([][]float32, batch*channels)
				for _, to := range append(cuts, length) {
					piece := sliceTime(x, from, to)
					var y *value
					y, state = run(piece, state)
					for row := range pieces {
						pieces[row] = append(pieces[row], y.data.([]float32)[row*(to-from):(row+1)*(to-from)]...)
					}
					from = to
				}
				for _, p := range pieces {
					gotY = append(gotY, p...)
				}
				assert.Equal(t, wantY.data, gotY, "silu %v, first state %v, cuts %v", silu, first != nil, cuts)
				assert.Equal(t, wantState.data, state.data, "silu %v, first state %v, cuts %v", silu, first != nil, cuts)
			}
		}
	}
}

// sliceTime returns positions from..to−1 of a (batch, channels, length)
// value.
func sliceTime(x *value, from, to int) *value {
	b, c, l := x.shape[0], x.shape[1], x.shape[2]
	data := make([]float32, 0, b*c*(to-from))
	src := x.data.([]float32)
	for row := range b * c {
		data = append(data, src[row*l+from:row*l+to]...)
	}
	return valueOf([]int{b, c, to - from}, data)
}

// TestCausalConvErrors checks that every inconsistent call is refused with
// a message naming the input or attribute.
func TestCausalConvErrors(t *testing.T) {
	zeros := func(shape ...int) *value { return f32(shape, make([]float32, numel(shape))...) }
	x, w := zeros(2, 3, 5), zeros(3, 1, 4)
	for _, c := range []struct {
		name       string
		activation string
		in         []*value
		err        string
	}{
		{"activation", "relu", []*value{x, w}, `activation is "relu", want "none", "silu" or "swish"`},
		{"input rank", "", []*value{zeros(3, 5), w}, "input is float32 (3, 5); want (batch, channels, length)"},
		{"input dtype", "", []*value{i64(dims(1, 1, 1), 1), w}, "input is int64 (1, 1, 1); want float32 or float64"},
		{"weight channels", "", []*value{x, zeros(2, 1, 4)}, "weight is float32 (2, 1, 4); want float32 (3, 1, k) with k ≥ 1"},
		{"weight middle", "", []*value{x, zeros(3, 2, 4)}, "weight is float32 (3, 2, 4)"},
		{"weight empty kernel", "", []*value{x, zeros(3, 1, 0)}, "with k ≥ 1"},
		{"weight dtype", "", []*value{x, f64(dims(3, 1, 1), 1, 1, 1)}, "weight is float64 (3, 1, 1)"},
		{"bias", "", []*value{x, w, zeros(2)}, "bias is float32 (2,); want float32 (3,)"},
		{"past", "", []*value{x, w, nil, zeros(2, 3, 4)}, "past_state is float32 (2, 3, 4); want float32 (2, 3, 3), (batch, channels, k − 1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := &node{op: "CausalConvWithState", opset: 27, spec: ops["CausalConvWithState"], attrs: attrs{}, out: []int{0, 1}}
			if c.activation != "" {
				n.attrs["activation"] = attribute{kind: attrString, s: c.activation}
			}
			_, err := n.spec.run(testRun, n, c.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.err)
		})
	}
}
