package layers

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
)

// Every attention.linear case of frontier_layers.json (Hugging Face's
// Qwen3-Next gated DeltaNet and its rule swaps), exported at opset 27 as
// ONNX's LinearAttention op and at 17 and 25 in standard ops, gives on
// attnrun's executor the module's output: ONNX Runtime 1.31.1 refuses
// opset-27 models, so the executor's recurrence is what checks the op form.
func TestLinearAttentionExportsAgainstHuggingFace(t *testing.T) {
	names, cases := frontierCases(t)
	checked := 0
	for _, name := range names {
		c := cases[name]
		if c.Type != "attention.linear" {
			continue
		}
		checked++
		for _, opset := range []int{17, 25, linearAttentionOpset} {
			t.Run(fmt.Sprintf("%s/opset%d", name, opset), func(t *testing.T) {
				live := modernCase{Type: c.Type, Config: c.Config, Params: c.Params, Inputs: c.Inputs}
				m := live.model(t)
				pb, err := export.Model(m, export.Options{Opset: opset})
				require.NoError(t, err)
				ops := opTypesOf(pb)
				require.Equal(t, opset >= linearAttentionOpset, slices.Contains(ops, "LinearAttention"), "ops at opset %d: %v", opset, ops)
				g, err := exec.New(pb)
				require.NoError(t, err)
				in := pb.GetGraph().GetInput()[0]
				x := live.fedAs(c.Inputs[0].dense(), len(onnxio.Dims(in)), m, 0)
				outs, err := g.Run(map[string]*tensor.Dense{in.GetName(): x})
				require.NoError(t, err)
				y := outs[export.OutputName]
				require.Equal(t, c.Output.Shape, []int(y.Shape())[y.Dims()-len(c.Output.Shape):], "output shape (unbatched cases run as a batch of 1)")
				require.Equal(t, len(c.Output.Data), y.Shape().TotalSize())
				assertCloseNaN(t, c.Output.Data, floats(y), torchAbs, torchRel, "output")
				assertCloseNaN(t, c.Float64.Data, floats(y), torchAbs, torchRel, "float64 output")
			})
		}
	}
	require.Equal(t, 5, checked, "attention.linear cases in frontier_layers.json")
}
