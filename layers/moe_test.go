package layers

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// moeCase is one entry of testdata/moe_cases.json (moe_cases.py):
// Hugging Face's MixtralSparseMoeBlock or Qwen2MoeSparseMoeBlock.
type moeCase struct {
	Config json.RawMessage `json:"config"`
	Params stateDict       `json:"params"`
	Input  array           `json:"input"`
	Output array           `json:"output"`
}

var loadMoECases = goldenCases[moeCase]("moe_cases.json")

// TestMoEMatchesHuggingFace: nn.moe gives the blocks' outputs, batched and
// one sequence at a time, with the state_dict's names, order and shapes.
func TestMoEMatchesHuggingFace(t *testing.T) {
	cases, err := loadMoECases()
	require.NoError(t, err)
	require.Len(t, cases, 3)
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l := fromYAML(t, "nn.moe", string(c.Config)) // JSON is YAML
			setParams(t, l, c.Params, "")
			y, err := l.Forward(&registry.Run{}, []*tensor.Dense{c.Input.dense()})
			require.NoError(t, err)
			assert.Equal(t, c.Output.Shape, []int(y.Shape()))
			assertClose(t, c.Output.Data, floats(y), 1e-6, 1e-5, name)

			T, d := c.Input.Shape[1], c.Input.Shape[2]
			one := newDense([]int{T, d}, append([]float32(nil), c.Input.Data[:T*d]...))
			y, err = l.Forward(&registry.Run{}, []*tensor.Dense{one})
			require.NoError(t, err)
			assert.Equal(t, []int{T, d}, []int(y.Shape()))
			assertClose(t, c.Output.Data[:T*d], floats(y), 1e-6, 1e-5, name+", one sequence")
		})
	}
}

// TestMoERouteTies: the largest probabilities first, equal ones to the
// lower index (ONNX TopK's rule; torch.topk leaves it unspecified), and
// the weights renormalized only when asked.
func TestMoERouteTies(t *testing.T) {
	c := &moePrepared{chosen: 2, renormalize: true}
	assert.Equal(t, []moePick{{0, 0.5}, {1, 0.5}}, c.route(nil, []float32{3, 3, 3, 3}))
	c.renormalize = false
	picks := c.route(nil, []float32{0, -100, float32(math.Ln2), 0}) // probabilities ¼, ~0, ½, ¼
	require.Len(t, picks, 2)
	assert.Equal(t, []int{2, 0}, []int{picks[0].expert, picks[1].expert})
	assert.InDelta(t, 0.5, picks[0].weight, 1e-7)
	assert.InDelta(t, 0.25, picks[1].weight, 1e-7)

	nan := float32(math.NaN())
	picks = c.route(nil, []float32{nan, nan, nan})
	require.Len(t, picks, 2)
	assert.True(t, math.IsNaN(float64(picks[0].weight)), "NaN logits give NaN weights")
}

// TestMoEFLOPs counts the router, top_k experts and the shared expert per
// token: for 2·5 tokens of width 16, 4 experts, top 2 of hidden 12 and a
// shared expert of 20, 2·10·16·(4 + 3·2·12 + 3·20 + 1).
func TestMoEFLOPs(t *testing.T) {
	l := fromYAML(t, "nn.moe", "{d: 16, d_hidden: 12, experts: 4, top_k: 2, shared_d_hidden: 20}")
	require.NoError(t, l.Validate())
	n, err := l.(registry.FLOPCounter).FLOPs([]tensor.Shape{{2, 5, 16}})
	require.NoError(t, err)
	assert.Equal(t, int64(2*10*16*(4+3*2*12+3*20+1)), n)
	_, err = l.(registry.FLOPCounter).FLOPs([]tensor.Shape{{2, 5, 8}})
	assert.EqualError(t, err, "d mismatch: input last dim 8, layer expects d 16")
}

// TestMoERefuses: sizes, top_k above experts and unknown activations are
// errors naming the field.
func TestMoERefuses(t *testing.T) {
	for config, want := range map[string]string{
		"{d: 4, d_hidden: 8, experts: 2, top_k: 3}":            "top_k 3 exceeds experts 2",
		"{d: 4, d_hidden: 8, experts: 0}":                      "experts must be positive, got 0",
		"{d: 4, d_hidden: 8, experts: 2, activation: tanh}":    `activation "tanh" is not silu, gelu, gelu_tanh or relu`,
		"{d: 4, d_hidden: 8, experts: 2, shared_d_hidden: -1}": "shared_d_hidden -1: want 0 (no shared expert) or a positive width",
	} {
		assert.EqualError(t, fromYAML(t, "nn.moe", config).Validate(), want, config)
	}
	_, err := fromYAML(t, "nn.moe", "{d: 4, d_hidden: 8, experts: 2}").Forward(&registry.Run{}, nil)
	assert.ErrorIs(t, err, errNotValidated)
}
