package exec

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// flexNode is a FlexAttention node (ai.onnx.preview) named name.
func flexNode(name string, ins []string, out string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	n := nodeP(name, "FlexAttention", ins, []string{out}, attrs...)
	n.Domain = proto.String(previewDomain)
	return n
}

// graphAttr is a GRAPH attribute.
func graphAttr(name string, g *onnxpb.GraphProto) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: g}
}

// modGraph is a modifier body reading in and writing out, float32 unless
// dt says otherwise.
func modGraph(in, out string, dt onnxio.DataType, nodes ...*onnxpb.NodeProto) *onnxpb.GraphProto {
	return &onnxpb.GraphProto{Name: proto.String("mod"), Node: nodes,
		Input: []*onnxpb.ValueInfoProto{untyped(in, dt)}, Output: []*onnxpb.ValueInfoProto{untyped(out, dt)}}
}

// previewModel is a model (default opset 26, ai.onnx.preview 1) of the
// given nodes, float32 inputs of any shape and output Y.
func previewModel(inputs []string, nodes ...*onnxpb.NodeProto) *onnxpb.ModelProto {
	var vis []*onnxpb.ValueInfoProto
	for _, n := range inputs {
		vis = append(vis, untyped(n, onnxio.Float))
	}
	m := graphSpec{opset: 26, inputs: vis, outputs: []*onnxpb.ValueInfoProto{untyped("Y", onnxio.Float)}, nodes: nodes}.model()
	m.OpsetImport = append(m.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String(previewDomain), Version: proto.Int64(1)})
	return m
}

// addBias is a score_mod adding the outer value named bias.
func addBias(bias string) *onnxpb.AttributeProto {
	return graphAttr("score_mod", modGraph("s", "s_out", onnxio.Float, nodeP("", "Add", []string{"s", bias}, []string{"s_out"})))
}

// TestSubgraphNestedCapture runs a FlexAttention whose score_mod holds
// another FlexAttention, which reads the main graph's inputs (one level
// out) and whose own score_mod reads the main graph's bias (two levels
// out). It must equal the same computation written as two flat graphs.
func TestSubgraphNestedCapture(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 1))
	const B, H, L, S, E = 1, 2, 3, 4, 5
	in := map[string]*value{
		"Q": randomFloats(rng, Float32, []int{B, H, L, E}, -1, 1), "K": randomFloats(rng, Float32, []int{B, H, S, E}, -1, 1),
		"V":  randomFloats(rng, Float32, []int{B, H, S, E}, -1, 1),
		"Qi": randomFloats(rng, Float32, []int{B, H, L, E}, -1, 1), "Ki": randomFloats(rng, Float32, []int{B, H, 6, E}, -1, 1),
		"Vi":   randomFloats(rng, Float32, []int{B, H, 6, S}, -1, 1), // inner output (B, H, L, S) adds to the outer scores
		"bias": randomFloats(rng, Float32, []int{1, H, L, 6}, -2, 2),
	}
	inner := flexNode("inner", []string{"Qi", "Ki", "Vi"}, "z", addBias("bias"))
	body := modGraph("scores", "scores_out", onnxio.Float, inner, nodeP("", "Add", []string{"scores", "z"}, []string{"scores_out"}))
	nested, err := New(previewModel([]string{"Q", "K", "V", "Qi", "Ki", "Vi", "bias"},
		flexNode("outer", []string{"Q", "K", "V"}, "Y", graphAttr("score_mod", body))))
	require.NoError(t, err)
	require.Len(t, nested.nodes, 1)
	assert.Equal(t, []string{"Q", "K", "V", "Qi", "Ki", "Vi", "bias"}, nested.nodes[0].inName, "captures become inputs of the outer node")
	got, err := nested.run(in)
	require.NoError(t, err)

	first := previewModel([]string{"Qi", "Ki", "Vi", "bias"}, flexNode("inner", []string{"Qi", "Ki", "Vi"}, "Y", addBias("bias")))
	g1, err := New(first)
	require.NoError(t, err)
	z, err := g1.run(map[string]*value{"Qi": in["Qi"], "Ki": in["Ki"], "Vi": in["Vi"], "bias": in["bias"]})
	require.NoError(t, err)
	g2, err := New(previewModel([]string{"Q", "K", "V", "z"}, flexNode("outer", []string{"Q", "K", "V"}, "Y", addBias("z"))))
	require.NoError(t, err)
	want, err := g2.run(map[string]*value{"Q": in["Q"], "K": in["K"], "V": in["V"], "z": z[0]})
	require.NoError(t, err)
	assert.Equal(t, want[0].data, got[0].data)
	assert.Equal(t, []int{B, H, L, E}, got[0].shape)
}

// TestSubgraphOutputsOuterValue runs a score_mod whose output is a value
// of the main graph itself: every query then attends with the same
// scores, whatever Q and K are.
func TestSubgraphOutputsOuterValue(t *testing.T) {
	body := &onnxpb.GraphProto{Name: proto.String("constant_scores"),
		Input:  []*onnxpb.ValueInfoProto{untyped("s", onnxio.Float)},
		Output: []*onnxpb.ValueInfoProto{untyped("fixed", onnxio.Float)}}
	g, err := New(previewModel([]string{"Q", "K", "V", "fixed"}, flexNode("flex", []string{"Q", "K", "V"}, "Y", graphAttr("score_mod", body))))
	require.NoError(t, err)
	out, err := g.run(map[string]*value{
		"Q": f32(dims(1, 1, 1, 1), 7), "K": f32(dims(1, 1, 2, 1), 1, -3),
		"V": f32(dims(1, 1, 2, 1), 10, 20), "fixed": f32(dims(1, 1, 1, 2), 0, 0),
	})
	require.NoError(t, err)
	assertValue(t, f32(dims(1, 1, 1, 1), 15), out[0])
}

// TestSubgraphErrors checks how New reports problems in and around bodies
// and operator domains.
func TestSubgraphErrors(t *testing.T) {
	qkv := []string{"Q", "K", "V"}
	flex := func(attrs ...*onnxpb.AttributeProto) *onnxpb.ModelProto {
		return previewModel(qkv, flexNode("flex", qkv, "Y", attrs...))
	}
	notImported := flex()
	notImported.OpsetImport = notImported.OpsetImport[:1]
	version2 := flex()
	version2.OpsetImport[1].Version = proto.Int64(2)
	defaultDomain := flex()
	defaultDomain.Graph.Node[0].Domain = nil
	foreign := flex()
	foreign.Graph.Node[0].Domain = proto.String("com.microsoft")
	twoInputs := modGraph("s", "s_out", onnxio.Float, nodeP("", "Add", []string{"s", "t"}, []string{"s_out"}))
	twoInputs.Input = append(twoInputs.Input, untyped("t", onnxio.Float))
	cases := []struct {
		name string
		m    *onnxpb.ModelProto
		err  string
	}{
		{"capture of nothing", flex(addBias("ghost")),
			`node "flex" (ai.onnx.preview.FlexAttention): input "ghost" is not produced by any node, nor a graph input or initializer`},
		{"unsupported op in a body", flex(graphAttr("prob_mod", modGraph("p", "p_out", onnxio.Float, nodeP("", "Foo", []string{"p"}, []string{"p_out"})))),
			`node "flex": op "ai.onnx.preview.FlexAttention" attribute "prob_mod": node #0: op "Foo" (opset 26) is not supported; supported: Abs,`},
		// A body may output a value of the graph around it; when that graph has
		// none of the name either, the error names the node holding the body.
		{"body output nothing produces", flex(graphAttr("score_mod", modGraph("s", "s_out", onnxio.Float, nodeP("", "Neg", []string{"s"}, []string{"t"})))),
			`node "flex" (ai.onnx.preview.FlexAttention): input "s_out" is not produced by any node`},
		{"GRAPH attribute without a graph", flex(graphAttr("score_mod", nil)), `attribute "score_mod": holds no graph`},
		{"modifier of two inputs", flex(graphAttr("score_mod", twoInputs)), `subgraph "score_mod" has 2 inputs and 1 outputs; a modifier has one of each`},
		{"mask_mod", flex(graphAttr("mask_mod", modGraph("s", "s", onnxio.Float))), `has attribute "mask_mod", which FlexAttention no longer defines`},
		{"softmax_precision float16", flex(intAttr("softmax_precision", 10)), `softmax_precision float16 is not supported (float32 or float64)`},
		{"softmax_precision int64", flex(intAttr("softmax_precision", 7)), `softmax_precision int64 is not a floating-point type`},
		{"score_mod of the wrong kind", flex(intAttr("score_mod", 1)), `attribute "score_mod" must be GRAPH, is INT`},
		{"domain not imported", notImported, `node "flex": op "FlexAttention" is in domain "ai.onnx.preview", which the model does not import`},
		{"domain version", version2, `op "FlexAttention" is in domain "ai.onnx.preview" version 2, which is not supported (1 to 1)`},
		{"FlexAttention in the default domain", defaultDomain, `node "flex": op "FlexAttention" (opset 26) is not supported; supported: `},
		{"foreign domain", foreign, `op "FlexAttention" is in domain "com.microsoft"; only the default ONNX domain (ai.onnx) is supported, besides ai.onnx.preview`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.m)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.err)
		})
	}
	assert.Contains(t, SupportedOps(), "ai.onnx.preview.FlexAttention")
}

// TestSubgraphWarnings checks that what New accepts leniently inside a body
// is reported with the node and attribute that hold it.
func TestSubgraphWarnings(t *testing.T) {
	body := modGraph("s", "s_out", onnxio.Float, nodeP("neg", "Neg", []string{"s"}, []string{"s_out"}, intAttr("bogus", 1)))
	g, err := New(previewModel([]string{"Q", "K", "V"}, flexNode("flex", []string{"Q", "K", "V"}, "Y", graphAttr("score_mod", body))))
	require.NoError(t, err)
	require.Len(t, g.Warnings(), 1)
	assert.Equal(t, `node "flex" (ai.onnx.preview.FlexAttention): attribute "score_mod": node "neg": op "Neg" has unknown attribute "bogus", ignored as ONNX Runtime ignores it`, g.Warnings()[0])
}
