package exec

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEinsumNumpy runs Einsum on the equations of testdata/einsum
// (written by gen.py with numpy's einsum: matrix and batched products,
// attention-style head contractions, diagonals, traces, ellipsis
// broadcasting, chains of three operands, mixed-case implicit outputs) in
// float64, compared to 1e-12 relative, and in float32 at the float32
// tolerance.
func TestEinsumNumpy(t *testing.T) {
	raw, err := os.ReadFile("testdata/einsum/cases.json")
	require.NoError(t, err)
	type tensor struct {
		Shape []int     `json:"shape"`
		Data  []float64 `json:"data"`
	}
	var cases []struct {
		Equation string   `json:"equation"`
		Inputs   []tensor `json:"inputs"`
		Output   tensor   `json:"output"`
	}
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.NotEmpty(t, cases)
	for _, c := range cases {
		t.Run(c.Equation, func(t *testing.T) {
			var in []*value
			for _, x := range c.Inputs {
				in = append(in, valueOf(x.Shape, x.Data))
			}
			eq := attrs{"equation": {kind: attrString, s: c.Equation}}
			got, err := runOp(opCase{op: "Einsum", opset: 12, attrs: eq, in: in})
			require.NoError(t, err)
			require.Equal(t, shapeString(c.Output.Shape), shapeString(got[0].shape))
			for i, w := range c.Output.Data {
				g := got[0].data.([]float64)[i]
				assert.LessOrEqualf(t, math.Abs(g-w), 1e-12+1e-10*math.Abs(w), "element %d: got %v, want %v", i, g, w)
			}
			var in32 []*value
			for _, v := range in {
				in32 = append(in32, castValue(v, Float32))
			}
			got32, err := runOp(opCase{op: "Einsum", opset: 12, attrs: eq, in: in32})
			require.NoError(t, err)
			assertValue(t, castValue(valueOf(c.Output.Shape, c.Output.Data), Float32), got32[0])
		})
	}
}
