package exec

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// ortCases is where testdata/ort/attention_cases.py and run_cases.mjs
// wrote the Attention and RotaryEmbedding models with ONNX Runtime 1.30's
// outputs. The environment variable ATTNRUN_ATTENTION_CASES points the
// tests at a freshly generated set instead (scripts/attention_ort.sh).
const ortCases = "testdata/attention"

// ortManifest is the manifest.json attention_cases.py writes.
type ortManifest struct {
	Seed  int `json:"seed"`
	Cases []struct {
		Name    string `json:"name"`
		Op      string `json:"op"`
		Opset   int    `json:"opset"`
		Covers  string `json:"covers"`
		Differs string `json:"differs"` // "kind: explanation" where ONNX Runtime disagrees with the specification
	} `json:"cases"`
}

// readORTCases returns the cases' folder and manifest.
func readORTCases(t *testing.T) (string, ortManifest) {
	dir := ortCases
	if d := os.Getenv("ATTNRUN_ATTENTION_CASES"); d != "" {
		dir = d
	}
	var m ortManifest
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	require.NoError(t, err, "testdata/ort/attention_cases.py writes the cases")
	require.NoError(t, json.Unmarshal(data, &m))
	require.NotEmpty(t, m.Cases)
	return dir, m
}

// runORTCase runs a case's model (after edit, if not nil) on its inputs and
// returns the executor's outputs and ONNX Runtime's, in the model's order.
func runORTCase(t *testing.T, folder string, edit func(*onnxpb.ModelProto)) (got, want []*value, names []string) {
	t.Helper()
	m, err := onnxio.ReadModel(filepath.Join(folder, "model.onnx"))
	require.NoError(t, err)
	if edit != nil {
		edit(m)
	}
	g, err := New(m)
	require.NoError(t, err)
	ds, err := onnxio.ReadDataSet(filepath.Join(folder, "test_data_set_0"))
	require.NoError(t, err)
	require.Len(t, ds.Outputs, len(g.outputs), "ONNX Runtime's outputs (run_cases.mjs writes them)")
	got, err = runDataSet(g, ds)
	require.NoError(t, err)
	for k, tp := range ds.Outputs {
		w, err := tensorValue(tp)
		require.NoError(t, err)
		want = append(want, w)
		names = append(names, g.outputs[k].Name)
	}
	return got, want, names
}

// TestAttentionAgainstORT checks the executor against ONNX Runtime on every
// case where the two agree with the specification: every output, at rtol
// 1e-5 and atol 1e-6.
func TestAttentionAgainstORT(t *testing.T) {
	dir, m := readORTCases(t)
	ops := map[string]int{}
	for _, c := range m.Cases {
		if c.Differs != "" {
			continue
		}
		ops[c.Op]++
		t.Run(c.Name, func(t *testing.T) {
			got, want, names := runORTCase(t, filepath.Join(dir, c.Name), nil)
			for k := range want {
				assert.NoError(t, compareValues(got[k], want[k], tolerance{rtol: 1e-5, atol: 1e-6}), "%s: output %q", c.Covers, names[k])
			}
		})
	}
	assert.Positive(t, ops["Attention"])
	assert.Positive(t, ops["RotaryEmbedding"])
}

// TestAttentionDisagreesWithORT checks each known disagreement between ONNX
// Runtime 1.30 and the specification, both ways: that the executor does
// what the specification says, and that ONNX Runtime still does what the
// manifest says it does (so that the list cannot go stale).
func TestAttentionDisagreesWithORT(t *testing.T) {
	dir, m := readORTCases(t)
	n := 0
	for _, c := range m.Cases {
		if c.Differs == "" {
			continue
		}
		n++
		folder := filepath.Join(dir, "differs", c.Name)
		kind, _, _ := strings.Cut(c.Differs, ":")
		t.Run(c.Name, func(t *testing.T) {
			switch kind {
			case "mode2-sentinel":
				checkSentinel(t, folder)
			case "softmax-precision":
				checkSoftmaxPrecision(t, folder)
			default:
				t.Fatalf("unknown kind of disagreement %q", kind)
			}
		})
	}
	assert.Positive(t, n)
}

// checkSentinel: where the causal frontier, a bool mask or nonpad_kv_seqlen
// masks a key, the specification's mode-2 scores are −Inf and ONNX
// Runtime's are the lowest float32; everything else agrees.
func checkSentinel(t *testing.T, folder string) {
	got, want, names := runORTCase(t, folder, nil)
	sentinels := 0
	for k := range want {
		g, w := got[k].data.([]float32), want[k].data.([]float32)
		require.Equal(t, want[k].shape, got[k].shape, "output %q", names[k])
		for i := range w {
			if w[i] == -math.MaxFloat32 {
				sentinels++
				assert.True(t, math.IsInf(float64(g[i]), -1), "output %q[%d] is %g where ONNX Runtime has its sentinel; want -Inf", names[k], i, g[i])
				continue
			}
			assert.True(t, closeEnough(float64(g[i]), float64(w[i]), tolerance{rtol: 1e-5, atol: 1e-6}), "output %q[%d] is %g, ONNX Runtime %g", names[k], i, g[i], w[i])
		}
	}
	assert.Positive(t, sentinels, "ONNX Runtime no longer writes -3.4028235e38 for masked scores: the case agrees now")
}

// checkSoftmaxPrecision: ONNX Runtime computes as if softmax_precision
// were absent (the executor without it matches ONNX Runtime); the executor
// with it rounds the weights to the narrow type, so they differ from ONNX
// Runtime's by about that type's precision.
func checkSoftmaxPrecision(t *testing.T, folder string) {
	var narrow DType
	dropPrecision := func(m *onnxpb.ModelProto) {
		for _, nd := range m.GetGraph().GetNode() {
			nd.Attribute = slices.DeleteFunc(nd.Attribute, func(a *onnxpb.AttributeProto) bool {
				if a.GetName() == "softmax_precision" {
					narrow = DType(a.GetI())
					return true
				}
				return false
			})
		}
	}
	plain, ort, names := runORTCase(t, folder, dropPrecision)
	for k := range ort {
		assert.NoError(t, compareValues(plain[k], ort[k], tolerance{rtol: 1e-5, atol: 1e-6}),
			"ONNX Runtime no longer ignores softmax_precision (output %q)", names[k])
	}
	round, eps := roundFloat16, 0x1p-11
	if narrow == attnBFloat16 {
		round, eps = roundBFloat16, 0x1p-8
	}
	got, _, _ := runORTCase(t, folder, nil)
	qk := slices.Index(names, "qk_matmul_output")
	require.GreaterOrEqual(t, qk, 0, "the case asks for the mode-3 weights")
	w, o := got[qk].data.([]float32), ort[qk].data.([]float32)
	worst := 0.0
	for i := range w {
		assert.Equal(t, round(w[i]), w[i], "weight %d is not a %s value", i, narrow)
		worst = max(worst, math.Abs(float64(w[i]-o[i])))
	}
	// Each weight carries the rounding of its scores (half an ulp of each,
	// amplified by at most the largest score, here below 8) and its own.
	assert.Greater(t, worst, 1e-5, "rounding to %s changes nothing", narrow)
	assert.Less(t, worst, 10*eps, "weights further from float32 ones than %s rounding explains", narrow)
}
