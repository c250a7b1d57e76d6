package models

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

const wrapperYAML = `name: wrapper
layers:
  - name: attn
    type: attention.multihead_wrapper
    d_in: 3
    d_out: 2
    context_length: 6
    num_heads: 2
`

func TestParseConfigErrors(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown layer type", "name: m\nlayers:\n  - {name: a, type: attention.nope}\n",
			[]string{"m.yaml:3:", `layer "a"`, `unknown layer type "attention.nope"`, "attention.multihead,", "nn.linear"}},
		{"unknown layer field", "name: m\nlayers:\n  - name: a\n    type: attention.causal\n    d_in: 3\n    d_out: 2\n    context_lenght: 6\n",
			[]string{"m.yaml:7:", `layer "a" (attention.causal)`, `unknown field "context_lenght"`, "context_length"}},
		{"unknown model field", "name: m\nlayer: []\n",
			[]string{"m.yaml:2:", `unknown field "layer"`}},
		{"num_heads does not divide d_out", "name: m\nlayers:\n  - {name: attn, type: attention.multihead, d_in: 8, d_out: 8, context_length: 4, num_heads: 3}\n",
			[]string{"m.yaml:3:", `layer "attn" (attention.multihead)`, "num_heads 3 does not divide d_out 8"}},
		{"wrong value type", "name: m\nlayers:\n  - name: a\n    type: nn.linear\n    d_in: three\n    d_out: 2\n",
			[]string{"m.yaml:5:", `layer "a" (nn.linear)`, "three"}},
		{"missing type", "name: m\nlayers:\n  - {name: a}\n",
			[]string{`layer "a" needs a type`, "attention.self"}},
		{"duplicate layer", "name: m\nlayers:\n  - {name: a, type: nn.dropout}\n  - {name: a, type: nn.dropout}\n",
			[]string{"m.yaml:4:", `layer name "a" is already used`}},
		{"forward reference", "name: m\nlayers:\n  - {name: a, type: nn.add, inputs: [x, b]}\n  - {name: b, type: nn.dropout}\n",
			[]string{`layer "a" reads "b"`, "neither a model input nor an earlier layer"}},
		{"no layers", "name: m\n", []string{`model "m" needs a non-empty list of layers`}},
		{"no name", "layers:\n  - {name: a, type: nn.dropout}\n", []string{"needs a name"}},
		{"malformed yaml", "name: [m\n", []string{"m.yaml"}},
		{"unknown output", "name: m\noutput: z\nlayers:\n  - {name: a, type: nn.dropout}\n", []string{`output "z"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.yaml), "m.yaml")
			require.Error(t, err)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestForwardErrorsNameTheLayer(t *testing.T) {
	m, err := Parse([]byte(wrapperYAML), "wrapper.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(123))

	wide := tensor.New(tensor.WithShape(6, 4), tensor.WithBacking(make([]float32, 24)))
	_, err = m.Forward(nil, wide)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `layer "attn" (attention.multihead_wrapper)`)
	assert.Contains(t, err.Error(), "d_in")

	long := tensor.New(tensor.WithShape(7, 3), tensor.WithBacking(make([]float32, 21)))
	_, err = m.Forward(nil, long)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sequence length 7 exceeds context_length 6")

	_, err = m.Forward(nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "takes 1 input(s) (x), got 0")
}

func TestLoadStateDict(t *testing.T) {
	m, err := Parse([]byte(wrapperYAML), "wrapper.yaml")
	require.NoError(t, err)
	names, dict := m.StateDict()
	require.Equal(t, []string{
		"attn.heads.0.W_query.weight", "attn.heads.0.W_key.weight", "attn.heads.0.W_value.weight",
		"attn.heads.1.W_query.weight", "attn.heads.1.W_key.weight", "attn.heads.1.W_value.weight",
	}, names)

	t.Run("missing parameter", func(t *testing.T) {
		partial := map[string]*tensor.Dense{}
		for k, v := range dict {
			partial[k] = v
		}
		delete(partial, "attn.heads.1.W_key.weight")
		err := m.LoadStateDict(partial)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `missing parameter(s) "attn.heads.1.W_key.weight"`)
	})
	t.Run("wrong shape", func(t *testing.T) {
		bad := map[string]*tensor.Dense{}
		for k, v := range dict {
			bad[k] = v
		}
		bad["attn.heads.0.W_query.weight"] = tensor.New(tensor.WithShape(3, 2), tensor.WithBacking(make([]float32, 6)))
		err := m.LoadStateDict(bad)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `"attn.heads.0.W_query.weight" has shape (3, 2), model "wrapper" expects (2, 3)`)
	})
	t.Run("unexpected key", func(t *testing.T) {
		extra := map[string]*tensor.Dense{"attn.heads.0.mask": tensor.New(tensor.WithShape(1), tensor.WithBacking([]float32{0}))}
		for k, v := range dict {
			extra[k] = v
		}
		err := m.LoadStateDict(extra)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `unexpected key(s) "attn.heads.0.mask"`)
	})
	t.Run("round trip", func(t *testing.T) {
		require.NoError(t, m.Init(7))
		_, saved := m.StateDict()
		other, err := Parse([]byte(wrapperYAML), "wrapper.yaml")
		require.NoError(t, err)
		require.NoError(t, other.LoadStateDict(saved))
		for i, p := range m.Params() {
			assert.Equal(t, p.Value.Data(), other.Params()[i].Value.Data())
		}
	})
}

func TestResidualWiring(t *testing.T) {
	cfg := `name: residual
layers:
  - {name: lin, type: nn.linear, d_in: 2, d_out: 2, bias: false}
  - {name: sum, type: nn.add, inputs: [x, lin]}
`
	m, err := Parse([]byte(cfg), "residual.yaml")
	require.NoError(t, err)
	w := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4})) // W = [[1,2],[3,4]]
	require.NoError(t, m.LoadStateDict(map[string]*tensor.Dense{"lin.weight": w}))
	x := tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float32{1, 1}))
	out, err := m.Forward(nil, x)
	require.NoError(t, err)
	// x + x·Wᵀ = [1,1] + [3,7]
	assert.Equal(t, []float32{4, 8}, out.Data())
}
