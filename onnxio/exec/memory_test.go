package exec

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// runTracked runs g on values with a budget of limit bytes and returns the
// outputs and the bytes still reserved once the run is over.
func runTracked(t *testing.T, g *Graph, limit int64, values map[string]*value) ([]*value, int64, error) {
	t.Helper()
	rc := newRunCtx(context.Background(), budget.New(limit))
	outs, err := g.execute(rc, values)
	return outs, rc.budget.Used(), err
}

// chain is x → Relu → Neg → Relu → ... (n nodes) → y, each step a new
// tensor of x's size.
func chain(n int) graphSpec {
	var nodes []*onnxpb.NodeProto
	prev := "x"
	for i := range n {
		out := "y"
		if i < n-1 {
			out = string(rune('a' + i))
		}
		nodes = append(nodes, nodeP(out, []string{"Relu", "Neg"}[i%2], []string{prev}, []string{out}))
		prev = out
	}
	return graphSpec{nodes: nodes, inputs: []*onnxpb.ValueInfoProto{untyped("x", onnxio.Float)}, outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)}}
}

// TestRunReleasesDeadValues runs a chain of 8 nodes of 4 KiB each under a
// 10 KiB budget: only dropping each value after its last reader keeps the
// run inside it (at most 2 values live), and at the end only the output is
// reserved.
func TestRunReleasesDeadValues(t *testing.T) {
	g, err := New(chain(8).model())
	require.NoError(t, err)
	x := valueOf(dims(1024), make([]float32, 1024))
	outs, used, err := runTracked(t, g, 10<<10, map[string]*value{"x": x})
	require.NoError(t, err)
	assertValue(t, x, outs[0])
	assert.Equal(t, int64(4<<10), used, "the output, and nothing else, is still reserved")

	_, _, err = runTracked(t, g, 6<<10, map[string]*value{"x": x})
	require.ErrorIs(t, err, budget.ErrExceeded)
	assert.EqualError(t, err, `exec: node "b" (Neg): float32 (1024,) needs 4 KiB, over the memory budget of 6 KiB (4 KiB already in use)`)
}

// TestRunAccountsViews checks that values sharing a block (Reshape,
// Identity, Squeeze views of an intermediate) keep it reserved while any
// of them lives and release it exactly once.
func TestRunAccountsViews(t *testing.T) {
	spec := graphSpec{
		nodes: []*onnxpb.NodeProto{
			nodeP("a", "Relu", []string{"x"}, []string{"a"}),                   // block A
			nodeP("view", "Reshape", []string{"a", "shape"}, []string{"view"}), // A, an output
			nodeP("same", "Identity", []string{"a"}, []string{"same"}),         // A, an output
			nodeP("sq", "Squeeze", []string{"view"}, []string{"sq"}),           // A, dead after b
			nodeP("b", "Neg", []string{"sq"}, []string{"b"}),                   // block B, an output
			nodeP("c", "Relu", []string{"view"}, []string{"c"}),                // block C, dead after d
			nodeP("d", "Shape", []string{"c"}, []string{"shape_of_c"}),         // a few bytes, output
		},
		inputs: []*onnxpb.ValueInfoProto{untyped("x", onnxio.Float)},
		outputs: []*onnxpb.ValueInfoProto{untyped("view", onnxio.Float), untyped("same", onnxio.Float),
			untyped("b", onnxio.Float), untyped("shape_of_c", onnxio.Int64)},
		inits: []*onnxpb.TensorProto{initializer(t, "shape", dense([]int{3}, int64(1), 1, 1024))},
	}
	g, err := New(spec.model())
	require.NoError(t, err)
	x := valueOf(dims(1024), make([]float32, 1024))
	outs, used, err := runTracked(t, g, 1<<20, map[string]*value{"x": x})
	require.NoError(t, err)
	require.Len(t, outs, 4)
	assert.Same(t, outs[0].mem, outs[1].mem, "Reshape and Identity share Relu's block")
	assert.Equal(t, int64(4<<10+4<<10+3*8), used, "A (once), B and the shape are reserved; C is released")

	// What Run returns shares nothing: one output per block is handed over,
	// the others are copies.
	res, err := g.Run(map[string]*tensor.Dense{"x": dense([]int{1024}, make([]float32, 1024)...)})
	require.NoError(t, err)
	view, same := res["view"].Data().([]float32), res["same"].Data().([]float32)
	view[0] = 7
	assert.Equal(t, float32(0), same[0], "outputs sharing a block are returned in separate memory")
}

// TestRunReleasesTemporaries checks that buffers an op uses and does not
// return (Gemm's transposes of int32 operands, its float64 sums) are
// released when the node is done.
func TestRunReleasesTemporaries(t *testing.T) {
	spec := graphSpec{
		nodes:   []*onnxpb.NodeProto{nodeP("gemm", "Gemm", []string{"a", "b", "c"}, []string{"y"}, intAttr("transA", 1), intAttr("transB", 1))},
		outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Int32)},
		inits: []*onnxpb.TensorProto{
			initializer(t, "a", dense([]int{2, 2}, int32(1), 2, 3, 4)),
			initializer(t, "b", dense([]int{2, 2}, int32(5), 6, 7, 8)),
			initializer(t, "c", dense([]int{2}, int32(1), -1)),
		},
	}
	g, err := New(spec.model())
	require.NoError(t, err)
	outs, used, err := runTracked(t, g, 1<<20, nil)
	require.NoError(t, err)
	// aᵀ·bᵀ + c = [[1 3] [2 4]]·[[5 7] [6 8]] + [1 -1]
	assertValue(t, i32(dims(2, 2), 24, 30, 35, 45), outs[0])
	assert.Equal(t, int64(4*4), used)
}

// TestBudgetOfEachRun checks that every run gets the whole budget: a run
// that fits fits again, and a failed run leaves nothing behind.
func TestBudgetOfEachRun(t *testing.T) {
	g, err := NewWithOptions(chain(4).model(), Options{MaxMemory: 10 << 10})
	require.NoError(t, err)
	x := dense([]int{1024}, make([]float32, 1024)...)
	for range 3 {
		_, err := g.Run(map[string]*tensor.Dense{"x": x})
		require.NoError(t, err)
	}
	_, err = g.Run(map[string]*tensor.Dense{"x": dense([]int{4096}, make([]float32, 4096)...)})
	var e *budget.ExceededError
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, int64(16<<10), e.Bytes)
	assert.Equal(t, int64(10<<10), e.Limit)
}
