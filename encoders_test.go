package attnrun

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
)

// TestBERTAsLayers: Hugging Face's tiny BertModel written as attnrun
// layers (testdata/encoders/bert.yaml: int64 input_ids, attention_mask and
// token_type_ids, token and token-type embeddings, learned positions,
// mask.padding's key-padding mask, post-norm attention.sdpa blocks) on
// Hugging Face's weights (bert.npz) gives PyTorch's last_hidden_state on
// the bert fixture's data sets, padding included, within 1e-5 relative and
// 1e-6 absolute.
func TestBERTAsLayers(t *testing.T) {
	dir := filepath.Join("testdata", "encoders")
	m, err := Load(filepath.Join(dir, "bert.yaml"), WithWeights(filepath.Join(dir, "bert.npz")))
	require.NoError(t, err)
	for _, set := range []string{"test_data_set_0", "test_data_set_1"} {
		inputs, outputs, err := onnxio.ReadDataSetArrays(filepath.Join("testdata", "pytorch2", "fixtures", "bert_sdpa_ts17", set))
		require.NoError(t, err)
		xs := make([]*tensor.Dense, len(inputs))
		for i, a := range inputs {
			xs[i], err = a.Dense()
			require.NoError(t, err)
		}
		got, err := m.Forward(context.Background(), xs...)
		require.NoError(t, err)
		want, err := outputs[0].Dense()
		require.NoError(t, err)
		require.Equal(t, want.Shape(), got.Shape(), set)
		assertClose32(t, want.Data().([]float32), got.Data().([]float32), set)
	}
}

// minilmDirEnv names a directory testdata/encoders/gen.py --minilm wrote:
// the real all-MiniLM-L6-v2 (90 MB, not committed) as attnrun layers, and
// sentence-transformers' embeddings.
const minilmDirEnv = "ATTNRUN_MINILM_DIR"

// TestMiniLMSentenceEmbeddings: the real all-MiniLM-L6-v2 as attnrun
// layers, with pool.mean over the attention mask and nn.normalize
// appended, gives sentence-transformers' encode() of the same token ids
// within 1e-5 relative and 1e-6 absolute (measured: 1.4e-7; the unit
// vectors' entries are small, so their hidden states' float32 spread of
// 4e-6, testdata/pytorch2/README.md, shrinks with the norm).
func TestMiniLMSentenceEmbeddings(t *testing.T) {
	dir := os.Getenv(minilmDirEnv)
	if dir == "" {
		t.Skipf("%s is not set: testdata/encoders/gen.py --minilm DIR writes the real MiniLM (90 MB) there", minilmDirEnv)
	}
	m, err := Load(filepath.Join(dir, "minilm.yaml"), WithWeights(filepath.Join(dir, "minilm.npz")))
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "minilm.json"))
	require.NoError(t, err)
	var golden struct {
		Cases []struct {
			InputIDs      [][]int64   `json:"input_ids"`
			AttentionMask [][]int64   `json:"attention_mask"`
			TokenTypeIDs  [][]int64   `json:"token_type_ids"`
			Embedding     [][]float64 `json:"embedding"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(b, &golden))
	require.NotEmpty(t, golden.Cases)
	var worst float64
	for k, c := range golden.Cases {
		got, err := m.Forward(context.Background(), ids2D(c.InputIDs), ids2D(c.AttentionMask), ids2D(c.TokenTypeIDs))
		require.NoError(t, err)
		require.Equal(t, []int{len(c.Embedding), len(c.Embedding[0])}, []int(got.Shape()))
		data := got.Data().([]float32)
		for i, row := range c.Embedding {
			for j, w := range row {
				require.InDelta(t, w, data[i*len(row)+j], 1e-6+1e-5*math.Abs(w), "case %d sentence %d dim %d", k, i, j)
				worst = max(worst, math.Abs(w-float64(data[i*len(row)+j])))
			}
		}
	}
	t.Logf("%d batches of sentences: largest difference from sentence-transformers %.3g", len(golden.Cases), worst)
}

func ids2D(rows [][]int64) *tensor.Dense {
	var ids []int64
	for _, r := range rows {
		ids = append(ids, r...)
	}
	return tensor.New(tensor.WithShape(len(rows), len(rows[0])), tensor.WithBacking(ids))
}

func assertClose32(t *testing.T, want, got []float32, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i, w := range want {
		if diff := math.Abs(float64(got[i]) - float64(w)); diff > 1e-6+1e-5*math.Abs(float64(w)) {
			require.Failf(t, msg, "element %d: got %.7g, want %.7g (diff %.3g)", i, got[i], w, diff)
		}
	}
}
