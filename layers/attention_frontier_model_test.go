package layers_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio/export"
)

// The frontier model (attention.sdpa with QK norm and sinks over
// grouped heads, attention.linear and attention.mla) runs incrementally, token by token and in chunks, with the rows
// of its full pass, as `attnrun run --incremental` runs it.
func TestFrontierModelDecodesAsForward(t *testing.T) {
	c := loadExportConfig(t, filepath.Join("testdata", "frontier.yaml"))
	require.NoError(t, c.model.CheckIncremental())
	x := randomTensor(c.shape, 3)
	full, err := c.model.Forward(nil, x)
	require.NoError(t, err)
	for _, chunk := range []int{1, 4} {
		got, err := c.model.Decode(nil, chunk, x)
		require.NoError(t, err)
		assertSameNaN(t, full, got, fmt.Sprintf("decoded %d token(s) per step", chunk))
	}
}

// The exported graphs are made of the standard ops their doc comments
// name: no control flow, no LinearAttention, nothing the executor or
// ONNX Runtime 1.31 lacks.
func TestFrontierExportedOps(t *testing.T) {
	standard := []string{"Add", "And", "Cast", "Concat", "Cos", "Div", "Equal", "Exp", "Expand", "Gather",
		"Greater", "Log", "MatMul", "Mul", "Neg", "Not", "Pow", "Range", "ReduceMean", "ReduceSum", "Reshape",
		"Shape", "Sigmoid", "Sin", "Slice", "Softmax", "Sqrt", "Sub", "Transpose", "Unsqueeze", "Where"}
	for _, config := range []string{"attention_linear.yaml", "attention_linear_delta.yaml", "attention_mla.yaml", "attention_mla_q_proj.yaml"} {
		c := loadExportConfig(t, filepath.Join(exportConfigs, config))
		for _, opset := range []int{13, 17, 24} {
			pb, err := export.Model(c.model, export.Options{Opset: opset})
			require.NoError(t, err)
			for _, op := range opTypes(pb) {
				require.True(t, slices.Contains(standard, op), "%s at opset %d uses %s", config, opset, op)
			}
		}
	}
}

// The exported parallel form of the gated delta rule stays within 1e-5 of
// the recurrence over a long sequence, where the cumulative log decays grow
// large (they are summed in float64 for that reason): with A = 1 and
// dt_bias 0.5 every token decays the state by about e⁻¹, so G reaches
// about −256 while the decays between neighbours still count.
func TestFrontierLinearExportLongSequence(t *testing.T) {
	m, err := models.Parse([]byte(`
name: long
layers:
  - {name: l, type: attention.linear, d: 8, num_heads: 2, update_rule: gated_delta}
`), "long.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(1))
	for _, p := range m.Params() {
		switch p.Name {
		case "l.A_log":
			clear(p.Value.Data().([]float32))
		case "l.dt_bias":
			for i := range p.Value.Data().([]float32) {
				p.Value.Data().([]float32)[i] = 0.5
			}
		}
	}
	g := exportAndLoad(t, m, 17)
	x := randomTensor([]int{1, 256, 8}, 5)
	assertSameAsForward(t, m, g, x, x)
}
