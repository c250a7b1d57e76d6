package lift

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
)

// TestVerifyCatchesAWrongLift checks the self-check Lift runs before it
// returns a model: a model whose numbers differ from the graph's, even by
// one weight, is refused.
func TestVerifyCatchesAWrongLift(t *testing.T) {
	m := fixture(t, "torch_mha_causal_self_opset17_dynamic")
	res, err := Lift(m)
	require.NoError(t, err)
	g, err := newGraph(m)
	require.NoError(t, err)
	a := &analysis{g: g}
	require.NoError(t, a.newProbes())
	check, err := a.verify(res.Model, []string{"x"}, res.Outputs)
	require.NoError(t, err)
	assert.Equal(t, 2, check.Runs)

	w := res.Model.Params()[0].Value.Data().([]float32)
	w[3] += 0.01
	res.Model.ParamsChanged() // the model ran: its layers keep packed weights
	_, err = a.verify(res.Model, []string{"x"}, res.Outputs)
	assert.ErrorContains(t, err, `output "y" differs`)
	w[3] -= 0.01
	res.Model.ParamsChanged()

	// The attention weights are checked as well as the output.
	outputs := append([]Output(nil), res.Outputs...)
	outputs[1].Weights = "heads"
	_, err = a.verify(res.Model, []string{"x"}, outputs)
	assert.ErrorContains(t, err, `output "weights"`)
}

// TestVerifyFeedsIDsAndKeepMasks checks that the self-check of a model
// with embeddings and an attention_mask feeds ids over the whole table and
// masks of 0s and 1s: a change to the last row of the word embeddings is
// caught, and the model as lifted passes.
func TestVerifyFeedsIDsAndKeepMasks(t *testing.T) {
	m, err := onnxio.ReadModel("testdata/hf_masks/embedded/model.onnx")
	require.NoError(t, err)
	res, err := Lift(m)
	require.NoError(t, err)
	g, err := newGraph(m)
	require.NoError(t, err)
	a := &analysis{g: g, keepMasks: map[string]bool{"attention_mask": true}, idBounds: map[string]int{"input_ids": 30, "token_type_ids": 2}}
	require.NoError(t, a.newProbes())
	inputs := []string{"input_ids", "attention_mask", "token_type_ids"}
	_, err = a.verify(res.Model, inputs, res.Outputs)
	require.NoError(t, err)

	var w []float32
	for _, p := range res.Model.Params() {
		if s := p.Value.Shape(); len(s) == 2 && s[0] == 30 {
			w = p.Value.Data().([]float32)
		}
	}
	require.Len(t, w, 30*16, "the word embeddings, (30, 16)")
	w[len(w)-1] += 0.5
	_, err = a.verify(res.Model, inputs, res.Outputs)
	assert.ErrorContains(t, err, `output "y" differs`)
}
