package exec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// functionP builds a FunctionProto of domain "local" importing the given
// default-domain opset.
func functionP(name string, opset int64, ins, outs []string, nodes ...*onnxpb.NodeProto) *onnxpb.FunctionProto {
	return &onnxpb.FunctionProto{Name: proto.String(name), Domain: proto.String("local"), Input: ins, Output: outs, Node: nodes,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(opset)}}}
}

// callP is a node calling local function name.
func callP(nodeName, name string, ins, outs []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	n := nodeP(nodeName, name, ins, outs, attrs...)
	n.Domain = proto.String("local")
	return n
}

// refAttr is an attribute referring to the function's attribute ref.
func refAttr(name, ref string, kind onnxpb.AttributeProto_AttributeType) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), RefAttrName: proto.String(ref), Type: kind.Enum()}
}

// functionModel is an opset-17 model of float32 input x and output y
// that imports domain local and defines the given functions.
func functionModel(opset int64, fs []*onnxpb.FunctionProto, nodes ...*onnxpb.NodeProto) *onnxpb.ModelProto {
	m := graphSpec{opset: opset, inputs: []*onnxpb.ValueInfoProto{untyped("x", onnxio.Float)},
		outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)}, nodes: nodes}.model()
	m.OpsetImport = append(m.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String("local"), Version: proto.Int64(1)})
	m.Functions = fs
	return m
}

// TestFunctionRunsAtItsOpset runs a function importing opset 18, where
// ReduceMean takes its axes as an input, called from an opset-17 model,
// where ReduceMean would refuse that input: the body's nodes run with
// their function's opset. (ONNX's checker requires both imports to
// resolve each op of the body to the same version, which makes this file
// invalid ONNX, and ONNX Runtime runs the body at the model's opset and
// refuses it; the executor does what the function says.)
func TestFunctionRunsAtItsOpset(t *testing.T) {
	f := functionP("RowMean", 18, []string{"X"}, []string{"Y"},
		nodeP("axes", "Constant", nil, []string{"axes"}, intsAttr("value_ints", -1)),
		nodeP("mean", "ReduceMean", []string{"X", "axes"}, []string{"Y"}, intAttr("keepdims", 0)))
	g, err := New(functionModel(17, []*onnxpb.FunctionProto{f}, callP("rows", "RowMean", []string{"x"}, []string{"y"})))
	require.NoError(t, err)
	out, err := g.run(map[string]*value{"x": f32(dims(2, 3), 1, 2, 6, -1, 0, 4)})
	require.NoError(t, err)
	assertValue(t, f32(dims(2), 3, 1), out[0])
	require.Len(t, g.nodes, 1)
	assert.Equal(t, 18, g.nodes[0].opset)
	assert.Equal(t, `"rows > local.RowMean > mean"`, g.nodes[0].label())

	// The same body in the model's own graph is refused at opset 17.
	g, err = New(graphSpec{opset: 17, inputs: []*onnxpb.ValueInfoProto{untyped("X", onnxio.Float)}, outputs: []*onnxpb.ValueInfoProto{untyped("Y", onnxio.Float)},
		nodes: f.Node}.model())
	require.NoError(t, err)
	_, err = g.run(map[string]*value{"X": f32(dims(2, 3), 1, 2, 6, -1, 0, 4)})
	assert.ErrorContains(t, err, `node "mean" (ReduceMean): has an axes input, which ReduceMean takes from opset 18 on (opset 17 has the axes attribute)`)
}

// TestFunctionNamesPerCallSite calls one function twice, the second time
// on the first call's output, with a body value named like a value of the
// main graph: each call site gets its own values.
func TestFunctionNamesPerCallSite(t *testing.T) {
	f := functionP("Twice", 17, []string{"X"}, []string{"Y"},
		nodeP("", "Add", []string{"X", "X"}, []string{"t"}),
		nodeP("", "Identity", []string{"t"}, []string{"Y"}))
	g, err := New(functionModel(17, []*onnxpb.FunctionProto{f},
		nodeP("", "Neg", []string{"x"}, []string{"t"}),
		callP("first", "Twice", []string{"t"}, []string{"u"}),
		callP("second", "Twice", []string{"u"}, []string{"v"}),
		nodeP("", "Add", []string{"v", "t"}, []string{"y"})))
	require.NoError(t, err)
	out, err := g.run(map[string]*value{"x": f32(dims(2), 1, -2)})
	require.NoError(t, err)
	assertValue(t, f32(dims(2), -5, 10), out[0]) // 4·(-x) + (-x)
}

// TestFunctionPassesInputThrough calls a function whose output is one of
// its inputs, and which has an output the call leaves out.
func TestFunctionPassesInputThrough(t *testing.T) {
	f := functionP("Pair", 17, []string{"A", "B"}, []string{"B", "S"}, nodeP("", "Add", []string{"A", "B"}, []string{"S"}))
	g, err := New(functionModel(17, []*onnxpb.FunctionProto{f},
		nodeP("", "Neg", []string{"x"}, []string{"n"}),
		callP("pair", "Pair", []string{"x", "n"}, []string{"b"}),
		nodeP("", "Mul", []string{"b", "x"}, []string{"y"})))
	require.NoError(t, err)
	out, err := g.run(map[string]*value{"x": f32(dims(2), 3, -2)})
	require.NoError(t, err)
	assertValue(t, f32(dims(2), -9, -4), out[0])
}

// TestFunctionInBody calls a function inside a Loop body: the expanded
// values belong to the body, and the function's default attribute
// applies.
func TestFunctionInBody(t *testing.T) {
	f := functionP("Scale", 17, []string{"X"}, []string{"Y"},
		nodeP("", "Constant", nil, []string{"s"}, refAttr("value_float", "by", onnxpb.AttributeProto_FLOAT)),
		nodeP("", "Mul", []string{"X", "s"}, []string{"Y"}))
	f.AttributeProto = []*onnxpb.AttributeProto{floatAttr("by", 3)}
	body := graphP("body", []*onnxpb.NodeProto{
		nodeP("", "Identity", []string{"c_in"}, []string{"c_out"}),
		callP("scale", "Scale", []string{"x_in"}, []string{"x_out"}),
	}, []*onnxpb.ValueInfoProto{scalarInfo("i", onnxio.Int64), scalarInfo("c_in", onnxio.Bool), untyped("x_in", onnxio.Float)},
		[]*onnxpb.ValueInfoProto{scalarInfo("c_out", onnxio.Bool), untyped("x_out", onnxio.Float)})
	m := functionModel(17, []*onnxpb.FunctionProto{f}, nodeP("loop", "Loop", []string{"M", "", "x"}, []string{"y"}, graphAttr("body", body)))
	m.Graph.Input = append(m.Graph.Input, scalarInfo("M", onnxio.Int64))
	g, err := New(m)
	require.NoError(t, err)
	out, err := g.run(map[string]*value{"x": f32(dims(2), 1, -0.5), "M": i64(dims(), 3)})
	require.NoError(t, err)
	assertValue(t, f32(dims(2), 27, -13.5), out[0])
}

// TestFunctionWarnings checks that an attribute the function does not
// declare is ignored with a warning naming the node and function.
func TestFunctionWarnings(t *testing.T) {
	f := functionP("Id", 17, []string{"X"}, []string{"Y"}, nodeP("", "Identity", []string{"X"}, []string{"Y"}))
	g, err := New(functionModel(17, []*onnxpb.FunctionProto{f}, callP("id", "Id", []string{"x"}, []string{"y"}, intAttr("bogus", 1))))
	require.NoError(t, err)
	assert.Equal(t, []string{`node "id": function local.Id has no attribute "bogus" (it declares none); ignored, as ONNX Runtime ignores unknown attributes`}, g.Warnings())
}

// TestFunctionErrors checks what New says about bad functions and calls.
func TestFunctionErrors(t *testing.T) {
	id := functionP("Id", 17, []string{"X"}, []string{"Y"}, nodeP("", "Identity", []string{"X"}, []string{"Y"}))
	selfCall := functionP("Loop", 17, []string{"X"}, []string{"Y"}, callP("again", "Loop", []string{"X"}, []string{"Y"}))
	a := functionP("A", 17, []string{"X"}, []string{"Y"}, callP("b", "B", []string{"X"}, []string{"Y"}))
	b := functionP("B", 17, []string{"X"}, []string{"Y"}, callP("a", "A", []string{"X"}, []string{"Y"}))
	future := functionP("Future", 99, []string{"X"}, []string{"Y"}, nodeP("", "Identity", []string{"X"}, []string{"Y"}))
	ghost := functionP("Ghost", 17, []string{"X"}, []string{"Y"}, nodeP("add", "Add", []string{"X", "Z"}, []string{"Y"}))
	unwritten := functionP("Unwritten", 17, []string{"X"}, []string{"Y", "W"}, nodeP("", "Identity", []string{"X"}, []string{"Y"}))
	unsupported := functionP("Odd", 17, []string{"X"}, []string{"Y"}, nodeP("odd", "Foo", []string{"X"}, []string{"Y"}))
	refType := functionP("Leaky", 17, []string{"X"}, []string{"Y"}, nodeP("lr", "LeakyRelu", []string{"X"}, []string{"Y"}, refAttr("alpha", "a", onnxpb.AttributeProto_FLOAT)))
	refType.Attribute = []string{"a"}
	call := func(name string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
		return callP("call", name, []string{"x"}, []string{"y"}, attrs...)
	}
	cases := []struct {
		name string
		m    *onnxpb.ModelProto
		err  string
	}{
		{"defined twice", functionModel(17, []*onnxpb.FunctionProto{id, id}, call("Id")), `exec: function local.Id is defined twice`},
		{"recursion", functionModel(17, []*onnxpb.FunctionProto{selfCall}, call("Loop")),
			`node "call > local.Loop > again": function local.Loop calls itself (through local.Loop > local.Loop)`},
		{"mutual recursion", functionModel(17, []*onnxpb.FunctionProto{a, b}, call("A")),
			`function local.A calls itself (through local.A > local.B > local.A)`},
		{"future opset", functionModel(17, []*onnxpb.FunctionProto{future}, call("Future")),
			`node "call": function local.Future: its body imports default-domain opset 99, which the executor does not run (1 to 28)`},
		{"value of nothing", functionModel(17, []*onnxpb.FunctionProto{ghost}, call("Ghost")),
			`node "call": function local.Ghost: node "add" reads "Z", which is neither an input of the function nor written by its body`},
		{"output of nothing", functionModel(17, []*onnxpb.FunctionProto{unwritten}, callP("call", "Unwritten", []string{"x"}, []string{"y", "w"})),
			`node "call": function local.Unwritten: output "W" is written by no node of the body, nor an input`},
		{"too many inputs", functionModel(17, []*onnxpb.FunctionProto{id}, callP("call", "Id", []string{"x", "x"}, []string{"y"})),
			`node "call": function local.Id: the node has 2 inputs; the function declares 1`},
		{"unsupported op in a body", functionModel(17, []*onnxpb.FunctionProto{unsupported}, call("Odd")),
			`node "call > local.Odd > odd": op "Foo" (opset 17) is not supported`},
		{"attribute of the wrong type", functionModel(17, []*onnxpb.FunctionProto{refType}, call("Leaky", intAttr("a", 1))),
			`node "call": function local.Leaky: node "lr": attribute "alpha" refers to "a", which is INT where FLOAT is expected`},
		{"reference outside a function", graphSpec{opset: 17, inputs: []*onnxpb.ValueInfoProto{untyped("x", onnxio.Float)}, outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			nodes: []*onnxpb.NodeProto{nodeP("lr", "LeakyRelu", []string{"x"}, []string{"y"}, refAttr("alpha", "a", onnxpb.AttributeProto_FLOAT))}}.model(),
			`node "lr": op "LeakyRelu" attribute "alpha" refers to a function attribute, which is not supported`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.m)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.err)
		})
	}
}

// TestFunctionOverloads calls two overloads of one function.
func TestFunctionOverloads(t *testing.T) {
	neg := functionP("F", 17, []string{"X"}, []string{"Y"}, nodeP("", "Neg", []string{"X"}, []string{"Y"}))
	abs := functionP("F", 17, []string{"X"}, []string{"Y"}, nodeP("", "Abs", []string{"X"}, []string{"Y"}))
	neg.Overload, abs.Overload = proto.String("neg"), proto.String("abs")
	a := callP("a", "F", []string{"x"}, []string{"a"})
	a.Overload = proto.String("abs")
	n := callP("n", "F", []string{"a"}, []string{"y"})
	n.Overload = proto.String("neg")
	g, err := New(functionModel(17, []*onnxpb.FunctionProto{neg, abs}, a, n))
	require.NoError(t, err)
	out, err := g.run(map[string]*value{"x": f32(dims(2), -3, 2)})
	require.NoError(t, err)
	assertValue(t, f32(dims(2), -3, -2), out[0])
}
