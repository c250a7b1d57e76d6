package exec

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
)

// TestDecodeStepsFused runs one decoding step with a KV cache of PyTorch
// 2.15's TorchScript exports of a Llama (grouped-query attention: its keys
// and values repeated by Reshape(Expand(Unsqueeze))) and a GPT-2
// (testdata/decode/gen.py), holds every output (logits and each present.*)
// to ONNX Runtime's on the same graph at 1e-5 relative, 1e-6 absolute, and
// checks that every attention ran fused: Q and Kᵀ scaled by Mul, the
// repeated heads read in place, the softmax's NaN guard
// (Where(IsNaN(P), 0, P)) kept. In the second data set a NaN in layer 0's
// cached keys makes the guard zero some weights: that layer's attention
// must take the original nodes, the others stay fused.
func TestDecodeStepsFused(t *testing.T) {
	for _, name := range []string{"llama_sdpa_ts17", "gpt2_sdpa_ts17"} {
		t.Run(name, func(t *testing.T) {
			m, err := onnxio.ReadModel(filepath.Join("..", "..", "testdata", "pytorch2", "fixtures", name, "model.onnx"))
			require.NoError(t, err)
			g, err := New(m)
			require.NoError(t, err)
			nodes, _, _ := g.attentionRuns()
			require.Equal(t, 2, nodes, "fused attention nodes, one per layer")

			for set, wantFallback := range []int64{0, 1} {
				inputs, want := readDecodeSet(t, g, filepath.Join("testdata", "decode", name, "test_data_set_"+string(rune('0'+set))))
				_, fused0, fallback0 := g.attentionRuns()
				got, err := g.RunArrays(context.Background(), inputs)
				require.NoError(t, err)
				for _, info := range g.Outputs() {
					assertArraysClose(t, info.Name, want[info.Name], got[info.Name], 1e-5, 1e-6)
				}
				_, fused, fallback := g.attentionRuns()
				assert.Equal(t, wantFallback, fallback-fallback0, "data set %d: attentions on the original nodes", set)
				assert.Equal(t, int64(nodes)-wantFallback, fused-fused0, "data set %d: fused attentions", set)
			}
		})
	}
}

// readDecodeSet reads a data set of gen.py: the graph's inputs and ONNX
// Runtime's outputs, by name.
func readDecodeSet(t *testing.T, g *Graph, dir string) (inputs, want map[string]*array.Array) {
	t.Helper()
	ins, outs, err := onnxio.ReadDataSetArrays(dir)
	require.NoError(t, err)
	require.Len(t, ins, len(g.Inputs()))
	require.Len(t, outs, len(g.Outputs()))
	inputs, want = map[string]*array.Array{}, map[string]*array.Array{}
	for i, info := range g.Inputs() {
		inputs[info.Name] = ins[i]
	}
	for i, info := range g.Outputs() {
		want[info.Name] = outs[i]
	}
	return inputs, want
}
