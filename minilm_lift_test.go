package attnrun

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/lift"
)

// minilmFixturesEnv names a directory testdata/pytorch2/gen.py wrote the
// MiniLM cases into (90 MB of real weights, not committed):
//
//	~/.cache/attnrun/venv/bin/python testdata/pytorch2/gen.py --all --cases 'minilm_*' --out DIR
const minilmFixturesEnv = "ATTNRUN_MINILM_FIXTURES"

// TestLiftedMiniLM lifts the real all-MiniLM-L6-v2 as each PyTorch
// exporter writes it (attn_implementation="eager": TorchScript at opset 17,
// dynamo at 18 and 23) into attnrun layers, without --partial, and checks
// the lifted model on the fixture's token ids: its last_hidden_state
// against PyTorch's by the float64 rule (PyTorch float32 itself strays
// 1.4e-6 to 1.7e-6 from float64 on this model, more than 1e-6 absolute:
// the lifted model must be within twice the larger float32 error of
// PyTorch and ONNX Runtime, plus 1e-6, of the float64 run,
// docs/crosscheck.md), and the sentence embedding (attnrun's pool.mean
// over attention_mask, then nn.normalize) against sentence-transformers'
// encode() within 1e-5 relative and 1e-6 absolute.
func TestLiftedMiniLM(t *testing.T) {
	dir := os.Getenv(minilmFixturesEnv)
	if dir == "" {
		t.Skipf("%s is not set: gen.py --all --cases 'minilm_*' --out DIR writes the real MiniLM exports (90 MB each) there", minilmFixturesEnv)
	}
	bounds := minilmBounds(t, dir)
	for _, name := range []string{"minilm_eager_ts17", "minilm_eager_dynamo18", "minilm_eager_dynamo23"} {
		t.Run(name, func(t *testing.T) {
			fixture := filepath.Join(dir, name)
			src, err := onnxio.ReadModel(filepath.Join(fixture, "model.onnx"))
			require.NoError(t, err)
			res, err := lift.Lift(src)
			require.NoError(t, err, "the real MiniLM must lift without --partial")
			require.Empty(t, res.Unlifted)
			pooling := sentencePooling(t)
			for k, set := range []string{"test_data_set_0", "test_data_set_1"} {
				inputs, outputs, err := onnxio.ReadDataSetArrays(filepath.Join(fixture, set))
				require.NoError(t, err)
				xs := make([]*tensor.Dense, len(inputs))
				for i, a := range inputs {
					d, err := a.Dense()
					require.NoError(t, err)
					xs[i], err = lift.ModelInput(d)
					require.NoError(t, err)
				}
				hidden, err := res.Model.Forward(nil, xs...)
				require.NoError(t, err)

				_, float64Out, err := onnxio.ReadDataSetArrays(filepath.Join(fixture, "float64", set))
				require.NoError(t, err)
				exact, err := float64Out[0].Dense()
				require.NoError(t, err)
				pytorch, err := outputs[0].Dense()
				require.NoError(t, err)
				fromExact := maxAbsDiff(t, exact, hidden)
				require.LessOrEqual(t, fromExact, bounds[name][k], "%s: last_hidden_state %g from float64", set, fromExact)
				t.Logf("%s: last_hidden_state %.3g from float64 (bound %.3g), %.3g from PyTorch float32",
					set, fromExact, bounds[name][k], maxAbsDiff(t, pytorch, hidden))

				embedding, err := pooling.Forward(nil, hidden, xs[1])
				require.NoError(t, err)
				tp, err := onnxio.ReadTensorFile(filepath.Join(fixture, set, "sentence_embedding.pb"))
				require.NoError(t, err)
				want, err := onnxio.TensorToDense(tp)
				require.NoError(t, err)
				require.Equal(t, want.Shape(), embedding.Shape(), set)
				assertClose32(t, want.Data().([]float32), embedding.Data().([]float32), set+" sentence embedding")
				t.Logf("%s: sentence embedding %.3g from sentence-transformers", set, maxAbsDiff(t, want, embedding))
			}
		})
	}
}

// sentencePooling is sentence-transformers' head of all-MiniLM-L6-v2 as
// attnrun layers: mean pooling over the attention mask, then L2
// normalization.
func sentencePooling(t *testing.T) *models.Model {
	t.Helper()
	m, err := models.Parse([]byte(`name: sentence_embedding
inputs: [last_hidden_state, {name: attention_mask, dtype: int64}]
layers:
  - {name: pooling, type: pool.mean, inputs: [last_hidden_state, attention_mask]}
  - {name: normalize, type: nn.normalize}
`), "sentence pooling")
	require.NoError(t, err)
	return m
}

// minilmBounds reads the float64 rule's bound of each MiniLM fixture's
// data sets from the generator's manifest.
func minilmBounds(t *testing.T, dir string) map[string][]float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	require.NoError(t, err)
	var manifest struct {
		Fixtures []struct {
			Name    string `json:"name"`
			Float64 struct {
				Sets []map[string]struct {
					Bound float64 `json:"bound"`
				} `json:"test_data_sets"`
			} `json:"float64"`
		} `json:"fixtures"`
	}
	require.NoError(t, json.Unmarshal(b, &manifest))
	out := map[string][]float64{}
	for _, f := range manifest.Fixtures {
		for _, set := range f.Float64.Sets {
			out[f.Name] = append(out[f.Name], set["last_hidden_state"].Bound)
		}
	}
	return out
}

// maxAbsDiff is the largest absolute difference of two float32 tensors of
// one shape.
func maxAbsDiff(t *testing.T, want, got *tensor.Dense) float64 {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape())
	var worst float64
	g := got.Data().([]float32)
	for i, w := range want.Data().([]float32) {
		worst = math.Max(worst, math.Abs(float64(g[i])-float64(w)))
	}
	return worst
}
