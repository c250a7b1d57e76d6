package graph

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

func node(op string, ins []string, outs ...string) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: proto.String(op), Input: ins, Output: outs}
}

func model(nodes ...*onnxpb.NodeProto) *onnxpb.ModelProto {
	return &onnxpb.ModelProto{
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Node:        nodes,
			Initializer: []*onnxpb.TensorProto{{Name: proto.String("w")}},
			Input:       []*onnxpb.ValueInfoProto{{Name: proto.String("x")}},
			Output:      []*onnxpb.ValueInfoProto{{Name: proto.String("y")}},
		},
	}
}

// TestGraphIndexesDataAndUses checks producers, consumers and the
// static/data marks on x → MatMul(x, w) → Add(·, Shape(x)) → y.
func TestGraphIndexesDataAndUses(t *testing.T) {
	g, err := New(model(
		node("MatMul", []string{"x", "w"}, "xw"),
		node("Shape", []string{"xw"}, "shape"),
		node("Identity", []string{"w"}, "w2"),
		node("Add", []string{"xw", "shape"}, "y"),
	))
	require.NoError(t, err)
	assert.Equal(t, int64(17), g.Opset)
	assert.Equal(t, []string{"y"}, g.Outputs)
	assert.Equal(t, "#0 (MatMul)", g.Producer("xw").Label())
	assert.Nil(t, g.Producer("x"))
	assert.Len(t, g.Consumers("xw"), 2)
	assert.Len(t, g.DataConsumers("xw"), 1, "Shape reads only the shape")
	assert.True(t, g.IsData("xw"))
	assert.True(t, g.Static("shape"), "a shape is known once the input shapes are")
	assert.True(t, g.IsData("y"))
	assert.True(t, g.IsInput("x"))
	assert.False(t, g.IsInput("w"))
	assert.True(t, g.IsOutput("y"))
	assert.Equal(t, "w", g.Origin("w2"))
	assert.Equal(t, []string{"w"}, g.StaticSources("w2"))
	assert.Nil(t, g.StaticSources("y"), "a data value")
	assert.Equal(t, []string{"x"}, g.DependsOnInputs("y"))
}

func TestGraphRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		nodes []*onnxpb.NodeProto
		want  string
	}{
		{"order", []*onnxpb.NodeProto{node("Relu", []string{"a"}, "y"), node("Relu", []string{"x"}, "a")}, `input "a" is not produced before it`},
		{"twice", []*onnxpb.NodeProto{node("Relu", []string{"x"}, "y"), node("Relu", []string{"x"}, "y")}, `writes "y", which already exists`},
		{"output", []*onnxpb.NodeProto{node("Relu", []string{"x"}, "z")}, `graph output "y" is not produced`},
	} {
		_, err := New(model(c.nodes...))
		assert.ErrorContains(t, err, c.want, c.name)
	}
	_, err := New(&onnxpb.ModelProto{})
	assert.ErrorContains(t, err, "no graph")
}

func TestUsesPrivate(t *testing.T) {
	u := NewUses[int, string](-1)
	u.Add("a", []int{0, -1}, []int{1})
	u.Add("b", []int{1, 1}, []int{2})
	u.Add("c", []int{2}, []int{3})
	u.MarkOutput(3)
	assert.False(t, u.Private(1), "read twice")
	assert.True(t, u.Private(2))
	assert.False(t, u.Private(3), "a graph output")
	assert.False(t, u.Private(-1))
	n, ok := u.LastReader(1)
	assert.True(t, ok)
	assert.Equal(t, "b", n)
	p, _ := u.Producer(3)
	assert.Equal(t, "c", p)
}
