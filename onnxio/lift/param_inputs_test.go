package lift_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// weightsAsInputs turns the named initializers of m into graph inputs of
// their shape, as ONNX Runtime's Attention tests declare weights.
func weightsAsInputs(t *testing.T, m *onnxpb.ModelProto, names ...string) {
	t.Helper()
	g := m.GetGraph()
	for _, name := range names {
		k := slices.IndexFunc(g.Initializer, func(tp *onnxpb.TensorProto) bool { return tp.GetName() == name })
		require.GreaterOrEqual(t, k, 0, name)
		dims := make([]onnxio.Dim, len(g.Initializer[k].GetDims()))
		for i, d := range g.Initializer[k].GetDims() {
			dims[i] = onnxio.FixedDim(d)
		}
		g.Input = append(g.Input, onnxio.TensorValueInfo(name, onnxio.Float, dims))
		g.Initializer = slices.Delete(g.Initializer, k, k+1)
	}
}

// TestWeightsGivenAsInputs: an attention whose key projection and output
// projection weights are graph inputs lifts; the lifted model binds them
// from the inputs (transposed, as nn.Linear stores them) and gives, on
// random tokens and random weights, what the graph gives; the binding
// survives the lifted file's metadata.
func TestWeightsGivenAsInputs(t *testing.T) {
	src := readFixture(t, "multihead_opset17_dynamic")
	weights := []string{"onnx::MatMul_110", "onnx::MatMul_113"} // W_key and out_proj
	weightsAsInputs(t, src, weights...)
	res, err := lift.Lift(src)
	require.NoError(t, err)
	var bound []string
	for _, b := range res.ParamInputs {
		bound = append(bound, b.Input+" -> "+b.Param)
		assert.True(t, b.Transposed, "MatMul holds the weight (in, out)")
	}
	assert.ElementsMatch(t, []string{"onnx::MatMul_110 -> attn.W_key.weight", "onnx::MatMul_113 -> attn.out_proj.weight"}, bound)
	assert.Contains(t, strings.Join(res.Notes, "\n"), `graph input(s) "onnx::MatMul_110", "onnx::MatMul_113" hold weights`)

	file, err := lift.Annotate(src, res)
	require.NoError(t, err)
	binds, err := lift.ReadParamInputs(file)
	require.NoError(t, err)
	assert.Equal(t, res.ParamInputs, binds)

	g, err := exec.New(src)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 5))
	random := func(shape ...int) *tensor.Dense {
		d := make([]float32, tensor.Shape(shape).TotalSize())
		for i := range d {
			d[i] = float32(rng.NormFloat64())
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	}
	for run := range 2 { // new weights each run: the binding is redone
		feeds := map[string]*tensor.Dense{"x": random(2, 5, 8)}
		for _, w := range weights {
			feeds[w] = random(8, 8)
		}
		want, err := g.Run(feeds)
		require.NoError(t, err)
		require.NoError(t, lift.BindParamInputs(res.Model, binds, feeds))
		got, err := lift.RunOutputs(res.Model, res.Outputs, &registry.Run{}, []*tensor.Dense{feeds["x"]})
		require.NoError(t, err)
		assertClose(t, want["y"], got[0], fmt.Sprintf("run %d", run))
	}

	err = lift.BindParamInputs(res.Model, binds, map[string]*tensor.Dense{weights[0]: random(8, 8)})
	assert.ErrorContains(t, err, `input "onnx::MatMul_113" (parameter "attn.out_proj.weight") is not given`)
	err = lift.BindParamInputs(res.Model, binds, map[string]*tensor.Dense{weights[0]: random(4, 8), weights[1]: random(8, 8)})
	assert.ErrorContains(t, err, "do not fit")
}
