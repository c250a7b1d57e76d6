package lift

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio"
	ir "github.com/attnrun/attnrun/onnxio/graph"
)

// TestAttentionOpRoPEOnRepeatedHeads reads the Attention ops of the dynamo
// exporter's Llama, Mistral and Qwen3 at opset 23 (KV cache split off): Q
// and K are rotated by RotaryEmbedding on (B, heads, T, head_dim) before
// repeat_kv's Unsqueeze, Expand and Reshape lay K and V out for the op,
// after Qwen3's per-head RMSNormalization (q_norm, k_norm);
// the operands still trace to their projections, with the rotation
// recorded, and K and V read as 2 heads repeated for 4 query heads of 16.
func TestAttentionOpRoPEOnRepeatedHeads(t *testing.T) {
	for _, name := range []string{"llama_sdpa_dynamo23", "mistral_sdpa_dynamo23", "qwen3_sdpa_dynamo23"} {
		t.Run(name, func(t *testing.T) {
			_, nodes := attentionOpNodes(t, name)
			for _, n := range nodes {
				l, ops := n.layer, n.ops
				assert.NotNil(t, ops[0].rope, "Q is rotated")
				assert.NotNil(t, ops[1].rope, "K is rotated")
				assert.Nil(t, ops[2].rope, "V is not")
				normed := name == "qwen3_sdpa_dynamo23" // q_norm and k_norm (RMSNormalization) on the heads before RoPE
				assert.Equal(t, normed, ops[0].norm != nil, "Q normalized per head")
				assert.Equal(t, normed, ops[1].norm != nil, "K normalized per head")
				if normed {
					q, k := ops[0].norm.rms(), ops[1].norm.rms()
					assert.Equal(t, [2]int{16, 16}, [2]int{q.Width, k.Width}, "normalized over heads of 16")
					assert.Equal(t, q.Eps, k.Eps, "one epsilon")
				}
				heads, kvHeads, headDim, err := l.heads(ops, true)
				require.NoError(t, err)
				assert.Equal(t, [3]int{4, 2, 16}, [3]int{heads, kvHeads, headDim})
			}
			assert.Len(t, nodes, 2)
		})
	}
}

// TestAttentionOpFusedFlattenedProjections reads the Attention ops of the
// dynamo exporter's GPT-2 at opset 23: Q, K and V are columns 0, 64 and
// 128 of one Conv1D (a Gemm on the tokens flattened to (B·T, 64), split in
// three), 4 heads of 16 each, and the output projection is a Gemm on the
// merged heads flattened too, its output the Reshape back to (B, T, 64).
func TestAttentionOpFusedFlattenedProjections(t *testing.T) {
	a, nodes := attentionOpNodes(t, "gpt2_sdpa_dynamo23")
	for _, n := range nodes {
		l, ops := n.layer, n.ops
		for i, what := range []string{"Q", "K", "V"} {
			assert.Equal(t, 192, ops[i].lin.dOut, "%s: the fused c_attn", what)
		}
		assert.Equal(t, ops[0].tokens, ops[1].tokens)
		shape, err := a.probes[0].shape(ops[0].tokens)
		require.NoError(t, err)
		assert.Len(t, shape, 3, "the tokens before the flattening")
		heads, kvHeads, headDim, err := l.heads(ops, true)
		require.NoError(t, err)
		assert.Equal(t, [3]int{4, 4, 16}, [3]int{heads, kvHeads, headDim})
		assert.Equal(t, [3]segment{{0, 16}, {64, 16}, {128, 16}}, l.segments)
		out, err := l.outProjection(heads, headDim, true)
		require.NoError(t, err)
		y, err := a.probes[0].shape(out.out)
		require.NoError(t, err)
		assert.Equal(t, shape, y, "the output projection's output, unflattened")
	}
	assert.Len(t, nodes, 2)
}

// attentionOpNode is one Attention node of a fixture read for lifting:
// its reader and its Q, K and V operands.
type attentionOpNode struct {
	layer *opLayer
	ops   [3]opOperand
}

// attentionOpNodes reads the committed PyTorch 2.x fixture name as Lift
// does (in order, the cache split off, probed) and every Attention node's
// operands, which must read.
func attentionOpNodes(t *testing.T, name string) (*analysis, []attentionOpNode) {
	t.Helper()
	m, err := onnxio.ReadModel(filepath.Join("../../testdata/pytorch2/fixtures", name, "model.onnx"))
	require.NoError(t, err)
	m, _ = ir.InOrder(m)
	m, _, err = splitCache(m)
	require.NoError(t, err)
	g, err := newGraph(m)
	require.NoError(t, err)
	g.limits = newExecLimits(context.Background(), 0)
	a := &analysis{g: g}
	require.NoError(t, a.newProbes())
	a.markLive()
	var nodes []attentionOpNode
	for _, n := range g.Nodes {
		if n.GetOpType() != "Attention" {
			continue
		}
		node := attentionOpNode{layer: &opLayer{a: a, n: n}}
		for i, what := range []string{"Q", "K", "V"} {
			node.ops[i], err = node.layer.operand(n.GetInput()[i], what, true, i < 2)
			require.NoError(t, err, what)
		}
		nodes = append(nodes, node)
	}
	return a, nodes
}
