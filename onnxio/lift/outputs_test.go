package lift_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/registry"
)

// TestSecondOutputIsALayersOutput: a graph that also returns an
// intermediate value, the first of two attention layers' output (as BERT
// returns its pooled output beside the sequence), lifts; the lifted model
// returns that layer's output as the second graph output, equal to the
// graph's, and an annotated file says so.
func TestSecondOutputIsALayersOutput(t *testing.T) {
	src, err := onnxio.ReadModel("testdata/sequenced_dynamic/model.onnx")
	require.NoError(t, err)
	g := src.GetGraph()
	inner := ""
	for _, n := range g.GetNode() {
		if strings.HasPrefix(n.GetName(), "/b/") && n.GetOpType() == "MatMul" {
			inner = n.GetInput()[0] // what the second attention reads: the first one's output
			break
		}
	}
	require.NotEmpty(t, inner)
	g.Output = append(g.Output, onnxio.TensorValueInfo(inner, onnxio.Float,
		[]onnxio.Dim{onnxio.SymbolicDim("batch"), onnxio.SymbolicDim("seq"), onnxio.FixedDim(8)}))

	res, err := lift.Lift(src)
	require.NoError(t, err)
	require.Len(t, res.Outputs, 2)
	assert.Equal(t, lift.Output{Name: inner, Layer: "a"}, res.Outputs[1])

	eg, err := exec.New(src)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 2*5*8)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	feeds := map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(2, 5, 8), tensor.WithBacking(x))}
	want, err := eg.Run(feeds)
	require.NoError(t, err)
	got, err := lift.RunOutputs(res.Model, res.Outputs, &registry.Run{}, []*tensor.Dense{feeds["x"]})
	require.NoError(t, err)
	assertClose(t, want["y"], got[0], "y")
	assertClose(t, want[inner], got[1], inner)

	file, err := lift.Annotate(src, res)
	require.NoError(t, err)
	_, outputs, err := lift.Load(file)
	require.NoError(t, err)
	assert.Equal(t, res.Outputs, outputs)
}
