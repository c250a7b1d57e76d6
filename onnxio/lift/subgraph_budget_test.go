package lift_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// sumGraph is an ONNX graph y = x + p0 + p1 + ..., x of shape (n) and each
// parameter pi of shape dims, base64 as an onnx.subgraph layer holds it.
func sumGraph(t testing.TB, params int, dims ...int64) string {
	t.Helper()
	fixed := make([]onnxio.Dim, len(dims))
	for i, d := range dims {
		fixed[i] = onnxio.FixedDim(d)
	}
	g := &onnxpb.GraphProto{Name: proto.String("sum")}
	g.Input = append(g.Input, onnxio.TensorValueInfo("x", onnxio.Float, fixed))
	last := "x"
	for i := range params {
		p := fmt.Sprintf("p%d", i)
		g.Input = append(g.Input, onnxio.TensorValueInfo(p, onnxio.Float, fixed))
		out := fmt.Sprintf("s%d", i)
		g.Node = append(g.Node, &onnxpb.NodeProto{OpType: proto.String("Add"), Input: []string{last, p}, Output: []string{out}})
		last = out
	}
	g.Output = []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo(last, onnxio.Float, fixed)}
	m := &onnxpb.ModelProto{IrVersion: proto.Int64(8), Graph: g,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}}}
	data, err := onnxio.EncodeModel(m)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(data)
}

// subgraphConfig is a model of one onnx.subgraph layer.
func subgraphConfig(graph string, params int) []byte {
	names := make([]string, params)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}
	return []byte(fmt.Sprintf("name: sub\nlayers:\n  - {name: g, type: onnx.subgraph, graph: %s, params: [%s]}\n",
		graph, strings.Join(names, ", ")))
}

// TestSubgraphParamsWithinBudget: a YAML of a few hundred bytes whose
// onnx.subgraph layer declares 64 parameters of 1 GiB used to allocate
// them one after the other. They are planned from the graph's
// declarations and refused by the budget before any is allocated.
func TestSubgraphParamsWithinBudget(t *testing.T) {
	config := subgraphConfig(sumGraph(t, 64, 16384, 16384), 64)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := models.Parse(config, "bomb.yaml")
	runtime.ReadMemStats(&after)
	require.Error(t, err)
	assert.True(t, errors.Is(err, budget.ErrExceeded), "%v", err)
	assert.ErrorContains(t, err, `bomb.yaml:3: layer "g" (onnx.subgraph): storage for 64 parameters (the largest: p0 of shape (16384, 16384)) needs 64 GiB, over the memory budget of 4 GiB`)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20))

	// Described without allocating: 64 × 2^28 parameters.
	m, err := models.Options{ShapesOnly: true}.Parse(config, "bomb.yaml")
	require.NoError(t, err)
	assert.Equal(t, 64<<28, m.NumParams())
}

// TestSubgraphRunsWithinBudget checks a small subgraph layer end to end:
// its parameters count against the budget, it runs, and the same config
// is refused under a budget too small for it.
func TestSubgraphRunsWithinBudget(t *testing.T) {
	config := subgraphConfig(sumGraph(t, 2, 4), 2)
	m, err := models.Options{MaxMemory: 1 << 20}.Parse(config, "sub.yaml")
	require.NoError(t, err)
	require.Len(t, m.Params(), 2)
	names, _ := m.StateDict()
	require.NoError(t, m.LoadStateDict(map[string]*tensor.Dense{
		names[0]: tensor.New(tensor.WithShape(4), tensor.WithBacking([]float32{1, 2, 3, 4})),
		names[1]: tensor.New(tensor.WithShape(4), tensor.WithBacking([]float32{10, 20, 30, 40})),
	}))
	x := tensor.New(tensor.WithShape(4), tensor.WithBacking([]float32{0.5, 0.5, 0.5, 0.5}))
	y, err := m.Forward(nil, x)
	require.NoError(t, err)
	assert.Equal(t, []float32{11.5, 22.5, 33.5, 44.5}, y.Data())

	_, err = models.Options{MaxMemory: 1000}.Parse(config, "sub.yaml")
	assert.ErrorContains(t, err, "over the memory budget of 1000 B")
}

// TestSubgraphParamErrors checks the declarations a parameter must have.
func TestSubgraphParamErrors(t *testing.T) {
	graph := sumGraph(t, 1, 4)
	for _, c := range []struct{ config, want string }{
		{fmt.Sprintf("{graph: %s, params: [q]}", graph), `params lists "q", which is not a graph input (or is listed twice)`},
		{fmt.Sprintf("{graph: %s, params: [p0, p0]}", graph), `params lists "p0", which is not a graph input (or is listed twice)`},
		{fmt.Sprintf("{graph: %s, params: [p0]}", sumGraph(t, 1, 0)), `parameter "p0" has dimension 0; parameters need fixed sizes from 1 to 2^31-1`},
		{"{graph: '!!', params: []}", "graph is not base64"},
	} {
		_, err := models.Parse([]byte("name: s\nlayers:\n  - {name: g, type: onnx.subgraph, "+strings.TrimPrefix(c.config, "{")+"\n"), "s.yaml")
		assert.ErrorContains(t, err, c.want)
	}
}
