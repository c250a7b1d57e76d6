package exec

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// controlCases is where testdata/control/gen.py wrote models of If, Loop,
// Scan and local functions with ONNX Runtime 1.31.1's outputs, and a
// PyTorch 2.15 export that keeps its modules as local functions, with
// PyTorch's.
const controlCases = "testdata/control"

// TestControlCases checks the executor against ONNX Runtime on every
// committed case at rtol 1e-5, atol 1e-6.
func TestControlCases(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(controlCases, "manifest.json"))
	require.NoError(t, err, "testdata/control/gen.py writes the cases")
	var manifest struct {
		Cases []struct{ Name, Covers string } `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(data, &manifest))
	require.Len(t, manifest.Cases, 16)
	for _, c := range manifest.Cases {
		t.Run(c.Name, func(t *testing.T) {
			m, err := onnxio.ReadModel(filepath.Join(controlCases, c.Name, "model.onnx"))
			require.NoError(t, err)
			assert.NoError(t, runNodeTest(m, filepath.Join(controlCases, c.Name), tolerance{rtol: 1e-5, atol: 1e-6}), c.Covers)
		})
	}
}

// scalarInfo declares a rank-0 tensor.
func scalarInfo(name string, dt onnxio.DataType) *onnxpb.ValueInfoProto { return info(name, dt) }

// graphP builds a body graph.
func graphP(name string, nodes []*onnxpb.NodeProto, ins, outs []*onnxpb.ValueInfoProto) *onnxpb.GraphProto {
	return &onnxpb.GraphProto{Name: proto.String(name), Node: nodes, Input: ins, Output: outs}
}

// endlessLoop is a Loop without trip count whose body keeps its condition
// true and, when scan is set, stacks a (1024,) float32 value each
// iteration.
func endlessLoop(t *testing.T, scan bool) (*node, []*value) {
	outs := []*onnxpb.ValueInfoProto{scalarInfo("c_out", onnxio.Bool), info("x_out", onnxio.Float, 1024)}
	nodes := []*onnxpb.NodeProto{nodeP("", "Identity", []string{"c_in"}, []string{"c_out"}), nodeP("", "Neg", []string{"x_in"}, []string{"x_out"})}
	loopOuts := []string{"x_final"}
	if scan {
		outs = append(outs, info("x_scan", onnxio.Float, 1024))
		nodes = append(nodes, nodeP("", "Identity", []string{"x_out"}, []string{"x_scan"}))
		loopOuts = append(loopOuts, "xs")
	}
	b := graphP("forever", nodes, []*onnxpb.ValueInfoProto{scalarInfo("i", onnxio.Int64), scalarInfo("c_in", onnxio.Bool), info("x_in", onnxio.Float, 1024)}, outs)
	vis := []*onnxpb.ValueInfoProto{info("x_final", onnxio.Float, 1024)}
	if scan {
		vis = append(vis, untyped("xs", onnxio.Float))
	}
	g, err := New(graphSpec{opset: 13, inputs: []*onnxpb.ValueInfoProto{scalarInfo("go", onnxio.Bool), info("x", onnxio.Float, 1024)}, outputs: vis,
		nodes: []*onnxpb.NodeProto{nodeP("loop", "Loop", []string{"", "go", "x"}, loopOuts, graphAttr("body", b))}}.model())
	require.NoError(t, err)
	return g.nodes[0], []*value{nil, bools(dims(), true), newValue(Float32, dims(1024))}
}

// TestLoopHonoursContextAndBudget runs loops that never end on their own:
// the run's deadline stops them, and with scan outputs the budget does
// first.
func TestLoopHonoursContextAndBudget(t *testing.T) {
	n, in := endlessLoop(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := n.spec.run(newRunCtx(ctx, nil), n, in)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), err)

	n, in = endlessLoop(t, true)
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := budget.New(1 << 20)
	_, err = n.spec.run(newRunCtx(ctx, b), n, in)
	require.Error(t, err)
	assert.True(t, errors.Is(err, budget.ErrExceeded), err)
	// The kept scan values fill the budget: the loop's reservation for them
	// or the body's next value is refused, whichever comes first.
	assert.Contains(t, err.Error(), "over the memory budget of 1 MiB")
	assert.Zero(t, b.Used(), "the reservations of the kept values are released")
}

// TestScanHonoursContextAndBudget runs a long Scan under a cancelled
// context and under a budget too small for its output.
func TestScanHonoursContextAndBudget(t *testing.T) {
	b := graphP("step", []*onnxpb.NodeProto{nodeP("", "Add", []string{"s", "x"}, []string{"s_out"}), nodeP("", "Identity", []string{"s_out"}, []string{"y"})},
		[]*onnxpb.ValueInfoProto{untyped("s", onnxio.Float), untyped("x", onnxio.Float)}, []*onnxpb.ValueInfoProto{untyped("s_out", onnxio.Float), untyped("y", onnxio.Float)})
	g, err := New(graphSpec{opset: 17, inputs: []*onnxpb.ValueInfoProto{untyped("s0", onnxio.Float), untyped("X", onnxio.Float)},
		outputs: []*onnxpb.ValueInfoProto{untyped("s", onnxio.Float), untyped("ys", onnxio.Float)},
		nodes:   []*onnxpb.NodeProto{nodeP("scan", "Scan", []string{"s0", "X"}, []string{"s", "ys"}, graphAttr("body", b), intAttr("num_scan_inputs", 1))}}.model())
	require.NoError(t, err)
	n := g.nodes[0]
	in := []*value{newValue(Float32, dims(256)), newValue(Float32, dims(1000, 256))}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = n.spec.run(newRunCtx(ctx, nil), n, in)
	assert.True(t, errors.Is(err, context.Canceled), err)
	_, err = n.spec.run(newRunCtx(context.Background(), budget.New(100_000)), n, in)
	assert.True(t, errors.Is(err, budget.ErrExceeded), err)
	assert.Contains(t, err.Error(), `float32 (1000, 256) needs 1000 KiB`) // runNode adds the node's name
	out, err := n.spec.run(testRun, n, in)
	require.NoError(t, err)
	assert.Equal(t, []int{1000, 256}, out[1].shape)
}

// TestIfOutputsOuterValues runs If branches that output values of the
// main graph as they are (ONNX Runtime refuses such files; ONNX allows
// them).
func TestIfOutputsOuterValues(t *testing.T) {
	then := graphP("then", nil, nil, []*onnxpb.ValueInfoProto{untyped("a", onnxio.Float)})
	els := graphP("else", nil, nil, []*onnxpb.ValueInfoProto{untyped("b", onnxio.Float)})
	g, err := New(graphSpec{opset: 11, inputs: []*onnxpb.ValueInfoProto{untyped("c", onnxio.Bool), untyped("a", onnxio.Float), untyped("b", onnxio.Float)},
		outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
		nodes:   []*onnxpb.NodeProto{nodeP("if", "If", []string{"c"}, []string{"y"}, graphAttr("then_branch", then), graphAttr("else_branch", els))}}.model())
	require.NoError(t, err)
	for _, c := range []bool{true, false} {
		out, err := g.run(map[string]*value{"c": bools(dims(1), c), "a": f32(dims(2), 1, 2), "b": f32(dims(2), 3, 4)})
		require.NoError(t, err)
		want := f32(dims(2), 3, 4)
		if c {
			want = f32(dims(2), 1, 2)
		}
		assertValue(t, want, out[0])
	}
	_, err = g.run(map[string]*value{"c": bools(dims(2), true, false), "a": f32(dims(2), 1, 2), "b": f32(dims(2), 3, 4)})
	assert.ErrorContains(t, err, `node "if" (If): cond must be a one-element bool tensor, is bool (2,)`)
}

// TestControlFlowErrors checks what New and Run say about malformed
// control-flow nodes.
func TestControlFlowErrors(t *testing.T) {
	scalarIn := []*onnxpb.ValueInfoProto{scalarInfo("i", onnxio.Int64), scalarInfo("c", onnxio.Bool)}
	condOut := []*onnxpb.ValueInfoProto{scalarInfo("c", onnxio.Bool)}
	pass := graphP("pass", nil, nil, []*onnxpb.ValueInfoProto{untyped("x", onnxio.Float)})
	scanBody := graphP("step", []*onnxpb.NodeProto{nodeP("", "Identity", []string{"s"}, []string{"s_out"}), nodeP("", "Identity", []string{"e"}, []string{"y"})},
		[]*onnxpb.ValueInfoProto{untyped("s", onnxio.Float), untyped("e", onnxio.Float)}, []*onnxpb.ValueInfoProto{untyped("s_out", onnxio.Float), untyped("y", onnxio.Float)})
	scan := func(opset int64, outs []string, attrs ...*onnxpb.AttributeProto) *onnxpb.ModelProto {
		ins := []string{"x", "x"}
		if opset < 9 {
			ins = append([]string{""}, ins...)
		}
		return graphSpec{opset: opset, inputs: []*onnxpb.ValueInfoProto{untyped("x", onnxio.Float)},
			outputs: []*onnxpb.ValueInfoProto{untyped("s", onnxio.Float)},
			nodes:   []*onnxpb.NodeProto{nodeP("scan", "Scan", ins, outs, append(attrs, graphAttr("body", scanBody))...)}}.model()
	}
	two := []string{"s", "ys"}
	one := intAttr("num_scan_inputs", 1)
	cases := []struct {
		name string
		m    *onnxpb.ModelProto
		err  string
	}{
		{"If without else", graphSpec{opset: 13, inputs: []*onnxpb.ValueInfoProto{untyped("c", onnxio.Bool), untyped("x", onnxio.Float)},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			nodes:   []*onnxpb.NodeProto{nodeP("if", "If", []string{"c"}, []string{"y"}, graphAttr("then_branch", pass))}}.model(),
			`node "if": op "If" needs attribute "else_branch" (a graph)`},
		{"If branch outputs", graphSpec{opset: 13, inputs: []*onnxpb.ValueInfoProto{untyped("c", onnxio.Bool), untyped("x", onnxio.Float)},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			nodes: []*onnxpb.NodeProto{nodeP("if", "If", []string{"c"}, []string{"y", "z"},
				graphAttr("then_branch", pass), graphAttr("else_branch", pass))}}.model(),
			`node "if": op "If" attribute "then_branch" has 0 inputs and 1 outputs; the node needs 0 and 2`},
		{"Loop body inputs", graphSpec{opset: 13, inputs: []*onnxpb.ValueInfoProto{untyped("x", onnxio.Float)},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			nodes:   []*onnxpb.NodeProto{nodeP("loop", "Loop", []string{"", "", "x"}, []string{"y"}, graphAttr("body", graphP("b", nil, scalarIn, condOut)))}}.model(),
			`node "loop": op "Loop" attribute "body" has 2 inputs and 1 outputs; the node needs 3 and 2`},
		{"Scan without num_scan_inputs", scan(17, two), `op "Scan" needs attribute num_scan_inputs of at least 1`},
		{"Scan axes count", scan(17, two, one, intsAttr("scan_input_axes", 0, 1)), `attribute "scan_input_axes" has 2 entries for 1 values`},
		{"Scan direction value", scan(17, two, one, intsAttr("scan_output_directions", 2)), `attribute "scan_output_directions" holds 2; directions are 0 (forward) or 1 (reverse)`},
		{"Scan-8 attribute of Scan-9", scan(8, two, one, intsAttr("scan_input_axes", 0)), `has attribute "scan_input_axes", which Scan defines from opset 9 on`},
		{"Scan-9 with directions", scan(9, two, one, intsAttr("directions", 0)), `has attribute "directions", which Scan replaced by scan_input_directions at opset 9`},
		{"Scan body arity", scan(17, []string{"s", "ys", "zs"}, one), `op "Scan" attribute "body" has 2 inputs and 2 outputs; the node needs 2 and 3`},
		{"Scan of more inputs than it has", scan(17, two, intAttr("num_scan_inputs", 3)), `op "Scan" has 2 inputs for 3 scanned ones`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.m)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.err)
		})
	}
}
