package lift_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// attention.linear exported at opset 27 is ONNX's LinearAttention op, and
// is lifted by structure from it: every update rule, grouped key heads
// (queries and keys repeated for the op's value heads), the convolution's
// kernel, the L2 norm, the gates' projections and parameters. The lifted
// layer computes the original's numbers and exports to the same
// initializers, whose executor outputs match.
func TestLiftLinearAttentionOp(t *testing.T) {
	for _, c := range []struct{ config, want string }{
		{"attention_linear", "{name: l, type: attention.linear, d: 32, num_heads: 4, head_k_dim: 8, head_v_dim: 8, update_rule: gated_delta, conv_kernel_size: 4, qk_l2norm: true, eps: 1e-06}"},
		{"attention_linear_delta", "{name: l, type: attention.linear, d: 12, num_heads: 4, num_key_heads: 2, head_k_dim: 4, head_v_dim: 2, update_rule: delta, conv_kernel_size: 3, qk_l2norm: true, eps: 1e-06}"},
		{"attention_linear_gated", "{name: l, type: attention.linear, d: 8, num_heads: 2, head_k_dim: 4, head_v_dim: 4, update_rule: gated, conv_kernel_size: 1, qk_l2norm: true, eps: 1e-06}"},
		{"attention_linear_plain", "{name: l, type: attention.linear, d: 8, num_heads: 2, head_k_dim: 4, head_v_dim: 4, update_rule: linear, conv_kernel_size: 4, qk_l2norm: false, eps: 1e-06}"},
	} {
		t.Run(c.config, func(t *testing.T) {
			m, _ := liftTestModel(t, c.config)
			for opset, want := range map[int]bool{export.AttentionOpset: false, 25: false, 27: true} {
				pb, err := export.Model(m, export.Options{Opset: opset})
				require.NoError(t, err)
				assert.Equal(t, want, slices.Contains(opTypesOf(pb.GetGraph().GetNode()), "LinearAttention"), "opset %d", opset)
			}
			checkStructuralLift(t, c.config, c.want, 27)
		})
	}
}

// opTypesOf lists the op types of nodes.
func opTypesOf[N interface{ GetOpType() string }](nodes []N) []string {
	var ops []string
	for _, n := range nodes {
		ops = append(ops, n.GetOpType())
	}
	return ops
}

// What attention.linear cannot be, a LinearAttention node states in its
// attributes and inputs; the lift names it rather than lift it wrong.
func TestLiftLinearAttentionOpRefusals(t *testing.T) {
	for _, c := range []struct {
		name   string
		tamper func(g *onnxpb.GraphProto, n *onnxpb.NodeProto)
		want   string
	}{
		{"scale", func(_ *onnxpb.GraphProto, n *onnxpb.NodeProto) {
			setAttr(n, "scale", func(a *onnxpb.AttributeProto) { a.F = proto.Float32(0.3) })
		},
			"scale 0.3: attention.linear scales by 1/√head_k_dim = 0.35355338"},
		{"past state", func(g *onnxpb.GraphProto, n *onnxpb.NodeProto) {
			past := proto.Clone(g.GetInput()[0]).(*onnxpb.ValueInfoProto)
			past.Name = proto.String("past_state")
			shape := past.GetType().GetTensorType().GetShape()
			dims := shape.GetDim()[:1]           // the batch
			for _, d := range []int64{4, 8, 8} { // heads, head_k_dim, head_v_dim
				dims = append(dims, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
			}
			shape.Dim = dims
			g.Input = append(g.Input, past)
			n.Input[3] = "past_state"
		}, "input past_state \"past_state\": attention.linear starts from a zero state"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, _ := liftTestModel(t, "attention_linear")
			pb, err := export.Model(m, export.Options{Opset: 27})
			require.NoError(t, err)
			pb.MetadataProps = nil
			found := false
			for _, n := range pb.GetGraph().GetNode() {
				if n.GetOpType() == "LinearAttention" {
					c.tamper(pb.GetGraph(), n)
					found = true
				}
			}
			require.True(t, found, "no LinearAttention node")
			_, err = lift.Lift(pb)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// setAttr changes a node's attribute.
func setAttr(n *onnxpb.NodeProto, name string, change func(*onnxpb.AttributeProto)) {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			change(a)
		}
	}
}

// The frontier model at opset 27, where attention.linear is the
// LinearAttention op, lifts by structure into its three layers, with the
// original's numbers.
func TestLiftFrontierModelAtOpset27(t *testing.T) {
	const frontier = `# input: [2, 6, 32]
name: frontier
layers:
  - {name: a, type: attention.sdpa, d: 32, num_heads: 4, num_kv_heads: 2, causal: true, qk_norm: rms, sinks: true}
  - {name: l, type: attention.linear, d: 32, num_heads: 4, update_rule: gated_delta}
  - {name: m, type: attention.mla, d: 32, num_heads: 4, q_lora_rank: 16, kv_lora_rank: 8, qk_nope_head_dim: 8, qk_rope_head_dim: 4, v_head_dim: 8}
`
	m, inputs := liftTestModel(t, frontier)
	pb, err := export.Model(m, export.Options{Opset: 27})
	require.NoError(t, err)
	require.Contains(t, opTypesOf(pb.GetGraph().GetNode()), "LinearAttention")
	pb.MetadataProps = nil
	res, err := lift.Lift(pb)
	require.NoError(t, err, "%v", res)
	assert.Equal(t, []string{"attention.sdpa", "attention.linear", "attention.mla"}, layerTypes(res.Config), res.Config)
	for seed := range uint64(2) {
		feeds := inputs(seed)
		want, err := m.Forward(nil, feeds["x"])
		require.NoError(t, err)
		got, err := res.Model.Forward(nil, feeds["x"])
		require.NoError(t, err)
		assertSameOutput(t, want, got)
	}
}
