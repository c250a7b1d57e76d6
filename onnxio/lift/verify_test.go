package lift

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
