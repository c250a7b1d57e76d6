package lift

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// TestSortRegionsPutsAKeepMaskBeforeItsReaders checks the order of a layer
// whose output the graph does not name and whose nodes run after one of
// its readers (Gemma 3's keep mask shared by a sliding-window attention and
// a global one whose mask the graph computes later): it comes before every
// layer that reads it, whatever its last node.
func TestSortRegionsPutsAKeepMaskBeforeItsReaders(t *testing.T) {
	relu := func(in, out string) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String("Relu"), Name: proto.String(out), Input: []string{in}, Output: []string{out}}
	}
	input := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT))}}}}
	}
	m := &onnxpb.ModelProto{OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}}, Graph: &onnxpb.GraphProto{
		Input: []*onnxpb.ValueInfoProto{input("x"), input("m")},
		Node:  []*onnxpb.NodeProto{relu("m", "mask0"), relu("x", "attn0"), relu("m", "mask1"), relu("attn0", "attn1")},
	}}
	g, err := newGraph(m)
	require.NoError(t, err)
	a := &analysis{g: g}
	nodeOf := func(out string) *node { return g.Producer(out) }
	mask := &region{kind: "mask", output: "m::keep", inputs: []string{"m"}, nodes: []*node{nodeOf("mask0"), nodeOf("mask1")}}
	attn0 := &region{kind: "attention", output: "attn0", inputs: []string{"x", "m::keep"}, nodes: []*node{nodeOf("attn0")}}
	attn1 := &region{kind: "attention", output: "attn1", inputs: []string{"attn0", "m::keep"}, nodes: []*node{nodeOf("attn1")}}
	rs := []*region{attn1, attn0, mask}
	a.sortRegions(rs)
	assert.Equal(t, []*region{mask, attn0, attn1}, rs)

	// A layer whose unnamed output no layer reads stays at its last node.
	tail := &region{kind: "mask", output: "m::other", inputs: []string{"m"}, nodes: []*node{nodeOf("mask1")}}
	rs = []*region{tail, attn1, attn0, mask}
	a.sortRegions(rs)
	assert.Equal(t, []*region{mask, attn0, tail, attn1}, rs)
}
