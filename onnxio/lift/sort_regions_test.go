package lift

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// A keep mask's layer runs before the layers that read it even when the
// graph computes part of it after one of them (ModernBERT through the
// dynamo exporter builds the second layer's sliding mask after the first
// attention), and the other layers keep the order of their outputs.
func TestSortRegionsPutsKeepMasksFirst(t *testing.T) {
	dims := []onnxio.Dim{onnxio.SymbolicDim("batch"), onnxio.SymbolicDim("sequence")}
	op := func(typ, out string, in ...string) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String(typ), Name: proto.String(out), Input: in, Output: []string{out}}
	}
	m := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(9),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(18)}},
		Graph: &onnxpb.GraphProto{
			Name: proto.String("late_mask"),
			Node: []*onnxpb.NodeProto{
				op("Neg", "first", "x"),       // the first layer, reading the mask
				op("Not", "late", "keep"),     // a later layer's part of the mask
				op("Neg", "second", "first"),  // the second layer
				op("Not", "mask_out", "late"), // what the second layer reads of the mask
				op("Identity", "y", "second"), // the output
			},
			Input: []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("x", onnxio.Float, dims),
				onnxio.TensorValueInfo("keep", onnxio.Bool, dims)},
			Output: []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("y", onnxio.Float, dims)},
		},
	}
	g, err := newGraph(m)
	require.NoError(t, err)
	a := &analysis{g: g}
	byName := map[string]*node{}
	for _, n := range g.Nodes {
		byName[n.GetName()] = n
	}
	first := &region{kind: "first", inputs: []string{"x", keepMaskValue("keep")}, output: "first", nodes: []*node{byName["first"]}}
	second := &region{kind: "second", inputs: []string{"first", keepMaskValue("keep")}, output: "second", nodes: []*node{byName["second"]}}
	mask := &region{kind: "mask", inputs: []string{"keep"}, output: keepMaskValue("keep"), nodes: []*node{byName["late"], byName["mask_out"]}}
	rs := []*region{second, mask, first}
	a.sortRegions(rs)
	var order []string
	for _, r := range rs {
		order = append(order, r.kind)
	}
	assert.Equal(t, []string{"mask", "first", "second"}, order)
}
