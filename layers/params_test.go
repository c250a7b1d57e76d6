package layers

import (
	"testing"

	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"gorgonia.org/tensor"
)

// TestRegistry checks that every built-in layer of formats.md is registered
// with a summary, and that New returns the documented defaults.
func TestRegistry(t *testing.T) {
	want := map[string]registry.Layer{
		"attention.simple":            &Simple{},
		"attention.self":              &Self{Weights: "linear", Scaled: true},
		"attention.causal":            &Causal{},
		"attention.multihead_wrapper": &MultiHeadWrapper{},
		"attention.multihead":         &MultiHead{OutBias: true, Causal: true},
		"attention.average":           &Average{},
		"position.learned":            &LearnedPosition{},
		"nn.linear":                   &Linear{Bias: true},
		"nn.dropout":                  &Dropout{P: 0.5},
		"nn.concat":                   &Concat{},
		"nn.add":                      &Add{},
	}
	for id, defaults := range want {
		info, err := registry.Lookup(id)
		require.NoError(t, err, id)
		require.NotEmpty(t, info.Summary, id)
		require.NotContains(t, info.Summary, "\n", id)
		require.Equal(t, defaults, info.New(), id)
	}
}

// TestYAMLConfig decodes every field formats.md lists, strictly, into the
// registered layer: it pins the yaml tags.
func TestYAMLConfig(t *testing.T) {
	tests := []struct {
		id   string
		yaml string
		want registry.Layer
	}{
		{"attention.simple", "scaled: true\ncausal: true", &Simple{Scaled: true, Causal: true}},
		{"attention.self", "d_in: 3\nd_out: 2\nweights: matrix\nqkv_bias: false\ncausal: true\nscaled: false",
			&Self{DIn: 3, DOut: 2, Weights: "matrix", Causal: true}},
		{"attention.causal", "d_in: 3\nd_out: 2\ncontext_length: 6\ndropout: 0.1\nqkv_bias: true",
			&Causal{DIn: 3, DOut: 2, ContextLength: 6, Dropout: 0.1, QKVBias: true}},
		{"attention.multihead_wrapper", "d_in: 3\nd_out: 2\ncontext_length: 6\nnum_heads: 2\ndropout: 0.0\nqkv_bias: true",
			&MultiHeadWrapper{DIn: 3, DOut: 2, ContextLength: 6, NumHeads: 2, QKVBias: true}},
		{"attention.multihead", "d_in: 3\nd_out: 4\ncontext_length: 6\nnum_heads: 2\ndropout: 0.2\nqkv_bias: true\nout_bias: false\ncausal: false",
			&MultiHead{DIn: 3, DOut: 4, ContextLength: 6, NumHeads: 2, Dropout: 0.2, QKVBias: true}},
		{"attention.average", "{}", &Average{}},
		{"position.learned", "context_length: 6\nd: 3", &LearnedPosition{ContextLength: 6, D: 3}},
		{"nn.linear", "d_in: 3\nd_out: 2\nbias: false", &Linear{DIn: 3, DOut: 2}},
		{"nn.dropout", "p: 0.1", &Dropout{P: 0.1}},
		{"nn.concat", "{}", &Concat{}},
		{"nn.add", "{}", &Add{}},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			info, err := registry.Lookup(tt.id)
			require.NoError(t, err)
			l := info.New()
			dec := yaml.NewDecoder(stringReader(tt.yaml))
			dec.KnownFields(true)
			require.NoError(t, dec.Decode(l))
			require.Equal(t, tt.want, l)
			require.NoError(t, l.Validate())

			// An unknown field must not decode into any layer.
			l = info.New()
			dec = yaml.NewDecoder(stringReader("no_such_field: 1"))
			dec.KnownFields(true)
			require.Error(t, dec.Decode(l))
		})
	}
}

// TestParams pins each layer's parameter names (PyTorch state_dict order),
// shapes and init schemes, and that Validate allocates them zeroed.
func TestParams(t *testing.T) {
	type param struct {
		name  string
		shape tensor.Shape
		init  registry.Init
	}
	lin := func(name string, out, in int) param {
		return param{name, tensor.Shape{out, in}, registry.LinearInit(in)}
	}
	bias := func(name string, out, in int) param {
		return param{name, tensor.Shape{out}, registry.LinearBiasInit(in)}
	}
	tests := []struct {
		name  string
		layer registry.Layer
		want  []param
	}{
		{"simple", &Simple{}, nil},
		{"average", &Average{}, nil},
		{"dropout", &Dropout{P: 0.1}, nil},
		{"concat", &Concat{}, nil},
		{"add", &Add{}, nil},
		{"self linear", &Self{DIn: 3, DOut: 2, Weights: "linear"}, []param{
			lin("W_query.weight", 2, 3), lin("W_key.weight", 2, 3), lin("W_value.weight", 2, 3),
		}},
		{"self linear bias", &Self{DIn: 3, DOut: 2, Weights: "linear", QKVBias: true}, []param{
			lin("W_query.weight", 2, 3), bias("W_query.bias", 2, 3),
			lin("W_key.weight", 2, 3), bias("W_key.bias", 2, 3),
			lin("W_value.weight", 2, 3), bias("W_value.bias", 2, 3),
		}},
		{"self matrix", &Self{DIn: 3, DOut: 2, Weights: "matrix"}, []param{
			{"W_query", tensor.Shape{3, 2}, registry.UniformInit(0, 1)},
			{"W_key", tensor.Shape{3, 2}, registry.UniformInit(0, 1)},
			{"W_value", tensor.Shape{3, 2}, registry.UniformInit(0, 1)},
		}},
		{"causal bias", &Causal{DIn: 3, DOut: 2, ContextLength: 6, QKVBias: true}, []param{
			lin("W_query.weight", 2, 3), bias("W_query.bias", 2, 3),
			lin("W_key.weight", 2, 3), bias("W_key.bias", 2, 3),
			lin("W_value.weight", 2, 3), bias("W_value.bias", 2, 3),
		}},
		{"multihead_wrapper", &MultiHeadWrapper{DIn: 3, DOut: 2, ContextLength: 6, NumHeads: 2}, []param{
			lin("heads.0.W_query.weight", 2, 3), lin("heads.0.W_key.weight", 2, 3), lin("heads.0.W_value.weight", 2, 3),
			lin("heads.1.W_query.weight", 2, 3), lin("heads.1.W_key.weight", 2, 3), lin("heads.1.W_value.weight", 2, 3),
		}},
		{"multihead_wrapper bias", &MultiHeadWrapper{DIn: 3, DOut: 2, ContextLength: 6, NumHeads: 1, QKVBias: true}, []param{
			lin("heads.0.W_query.weight", 2, 3), bias("heads.0.W_query.bias", 2, 3),
			lin("heads.0.W_key.weight", 2, 3), bias("heads.0.W_key.bias", 2, 3),
			lin("heads.0.W_value.weight", 2, 3), bias("heads.0.W_value.bias", 2, 3),
		}},
		{"multihead", &MultiHead{DIn: 3, DOut: 4, ContextLength: 6, NumHeads: 2, OutBias: true}, []param{
			lin("W_query.weight", 4, 3), lin("W_key.weight", 4, 3), lin("W_value.weight", 4, 3),
			lin("out_proj.weight", 4, 4), bias("out_proj.bias", 4, 4),
		}},
		{"multihead qkv_bias, no out_bias", &MultiHead{DIn: 3, DOut: 4, ContextLength: 6, NumHeads: 2, QKVBias: true}, []param{
			lin("W_query.weight", 4, 3), bias("W_query.bias", 4, 3),
			lin("W_key.weight", 4, 3), bias("W_key.bias", 4, 3),
			lin("W_value.weight", 4, 3), bias("W_value.bias", 4, 3),
			lin("out_proj.weight", 4, 4),
		}},
		{"position.learned", &LearnedPosition{ContextLength: 6, D: 3}, []param{
			{"weight", tensor.Shape{6, 3}, registry.NormalInit(0, 1)},
		}},
		{"nn.linear", &Linear{DIn: 3, DOut: 2, Bias: true}, []param{lin("weight", 2, 3), bias("bias", 2, 3)}},
		{"nn.linear without bias", &Linear{DIn: 3, DOut: 2}, []param{lin("weight", 2, 3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.layer.Validate())
			var got []param
			for _, p := range tt.layer.Params() {
				got = append(got, param{p.Name, p.Value.Shape(), p.Init})
				require.Equal(t, tensor.Float32, p.Value.Dtype(), p.Name)
				require.Equal(t, make([]float32, p.Value.Shape().TotalSize()), floats(p.Value), "%s not zeroed", p.Name)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// TestParamsAreTheLayersStorage checks that writing into a Param changes
// what Forward computes (Params returns storage, not copies).
func TestParamsAreTheLayersStorage(t *testing.T) {
	l := &Linear{DIn: 2, DOut: 1, Bias: true}
	require.NoError(t, l.Validate())
	ps := l.Params()
	copy(floats(ps[0].Value), []float32{2, 3})
	floats(ps[1].Value)[0] = 0.5
	out, _ := forward(t, matrix([][]float32{{1, 1}, {1, -1}}), l)
	require.Equal(t, []float32{5.5, -0.5}, floats(out))
}

// TestStridedInput feeds a non-contiguous view (a column slice) and
// requires the same output as for its contiguous copy.
func TestStridedInput(t *testing.T) {
	wide := matrix([][]float32{
		{0.43, 0.15, 0.89, 9},
		{0.55, 0.87, 0.66, 9},
		{0.57, 0.85, 0.64, 9},
	})
	view, err := wide.Slice(nil, tensor.S(0, 3))
	require.NoError(t, err)
	l := &Simple{}
	got, err := l.Forward(&registry.Run{}, []*tensor.Dense{view.(*tensor.Dense)})
	require.NoError(t, err)
	dense := matrix([][]float32{{0.43, 0.15, 0.89}, {0.55, 0.87, 0.66}, {0.57, 0.85, 0.64}})
	want, err := l.Forward(&registry.Run{}, []*tensor.Dense{dense})
	require.NoError(t, err)
	require.Equal(t, floats(want), floats(got))
}

// TestConcatAndAdd checks the two multi-input layers on small hand-made inputs.
func TestConcatAndAdd(t *testing.T) {
	a := newDense([]int{2, 2, 1}, []float32{1, 2, 3, 4})
	b := newDense([]int{2, 2, 2}, []float32{10, 11, 20, 21, 30, 31, 40, 41})
	c := newDense([]int{2, 2, 1}, []float32{-1, -2, -3, -4.5})

	out, err := (&Concat{}).Forward(&registry.Run{}, []*tensor.Dense{a, b, c})
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{2, 2, 4}, out.Shape())
	require.Equal(t, []float32{1, 10, 11, -1, 2, 20, 21, -2, 3, 30, 31, -3, 4, 40, 41, -4.5}, floats(out))

	out, err = (&Add{}).Forward(&registry.Run{}, []*tensor.Dense{a, c, a})
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{2, 2, 1}, out.Shape())
	require.Equal(t, []float32{1, 2, 3, 3.5}, floats(out))

	one, err := (&Concat{}).Forward(&registry.Run{}, []*tensor.Dense{b})
	require.NoError(t, err)
	require.Equal(t, floats(b), floats(one))
	require.Equal(t, b.Shape(), one.Shape())
}
