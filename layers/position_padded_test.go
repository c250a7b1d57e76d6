package layers

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
)

// position.padded numbers tokens as Hugging Face's
// create_position_ids_from_input_ids (padding_idx 1): cumsum(ids != 1) ·
// (ids != 1) + 1, worked out by hand here; its export computes the same
// rows on the executor.
func TestPaddedPositions(t *testing.T) {
	ids := []int64{5, 1, 7, 1, 9, 1, 1, 4, 5, 6}
	require.Equal(t, []int64{2, 1, 3, 1, 4, 1, 1, 2, 3, 4}, paddedPositions(ids, 5, 1))

	m, err := models.Parse([]byte("name: pos\ninputs: [{name: input_ids, dtype: int64}]\nlayers:\n  - {name: position, type: position.padded, num_embeddings: 6, embedding_dim: 2, padding_idx: 1}\n"), "pos.yaml")
	require.NoError(t, err)
	table := make([]float32, 12)
	for i := range table {
		table[i] = float32(10*(i/2) + i%2) // row r holds (10r, 10r+1)
	}
	require.NoError(t, m.LoadStateDict(map[string]*tensor.Dense{"position.weight": tensor.New(tensor.WithShape(6, 2), tensor.WithBacking(table))}))
	in := tensor.New(tensor.WithShape(2, 5), tensor.WithBacking(ids))
	got, err := m.Forward(nil, in)
	require.NoError(t, err)
	want := []float32{20, 21, 10, 11, 30, 31, 10, 11, 40, 41, 10, 11, 10, 11, 20, 21, 30, 31, 40, 41}
	require.Equal(t, want, got.Data())

	pb, err := export.Model(m, export.Options{})
	require.NoError(t, err)
	g, err := exec.New(pb)
	require.NoError(t, err)
	out, err := g.Run(map[string]*tensor.Dense{pb.GetGraph().GetInput()[0].GetName(): in})
	require.NoError(t, err)
	require.Equal(t, want, out[pb.GetGraph().GetOutput()[0].GetName()].Data())

	_, err = models.Parse([]byte("name: pos\nlayers:\n  - {name: p, type: position.padded, num_embeddings: 6, embedding_dim: 2, padding_idx: 6}\n"), "bad.yaml")
	require.ErrorContains(t, err, "padding_idx 6 is outside [0, 6)")
}

// With input: attention_mask, position.padded numbers tokens as OPT's
// learned positions do, (cumsum(m, 1) · m − 1) + 2 with padding_idx 1,
// worked out by hand here: the whole sequence, its export on the
// executor, and a step after 3 tokens, which returns the last 2 rows.
func TestPaddedPositionsFromMask(t *testing.T) {
	m, err := models.Parse([]byte("name: pos\ninputs: [{name: attention_mask, dtype: int64}]\nlayers:\n  - {name: position, type: position.padded, num_embeddings: 6, embedding_dim: 1, padding_idx: 1, input: attention_mask}\n"), "pos.yaml")
	require.NoError(t, err)
	table := []float32{0, 10, 20, 30, 40, 50} // row r holds 10r
	require.NoError(t, m.LoadStateDict(map[string]*tensor.Dense{"position.weight": tensor.New(tensor.WithShape(6, 1), tensor.WithBacking(table))}))
	mask := tensor.New(tensor.WithShape(2, 5), tensor.WithBacking([]int64{0, 0, 1, 1, 1, 1, 1, 1, 0, 1}))
	got, err := m.Forward(nil, mask)
	require.NoError(t, err)
	want := []float32{10, 10, 20, 30, 40, 20, 30, 40, 10, 50} // positions 1 1 2 3 4 and 2 3 4 1 5
	require.Equal(t, want, got.Data())

	pb, err := export.Model(m, export.Options{})
	require.NoError(t, err)
	g, err := exec.New(pb)
	require.NoError(t, err)
	out, err := g.Run(map[string]*tensor.Dense{pb.GetGraph().GetInput()[0].GetName(): mask})
	require.NoError(t, err)
	require.Equal(t, want, out[pb.GetGraph().GetOutput()[0].GetName()].Data())

	s, err := m.Resume(nil, 2, 3)
	require.NoError(t, err)
	step, err := m.Step(nil, s, mask)
	require.NoError(t, err)
	require.Equal(t, []int{2, 2, 1}, []int(step.Shape()))
	require.Equal(t, []float32{30, 40, 10, 50}, step.Data())

	ids, err := models.Parse([]byte("name: pos\ninputs: [{name: input_ids, dtype: int64}]\nlayers:\n  - {name: position, type: position.padded, num_embeddings: 6, embedding_dim: 1, padding_idx: 1}\n"), "ids.yaml")
	require.NoError(t, err)
	require.NoError(t, ids.LoadStateDict(map[string]*tensor.Dense{"position.weight": tensor.New(tensor.WithShape(6, 1), tensor.WithBacking(table))}))
	fresh, err := ids.NewState()
	require.NoError(t, err)
	_, err = ids.Step(nil, fresh, mask)
	require.ErrorContains(t, err, "steps with input: attention_mask only")
}
