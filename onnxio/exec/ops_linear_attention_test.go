package exec

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// linearConfig is the shape of a LinearAttention test: heads, head sizes
// and the layouts of decay and beta.
type linearConfig struct {
	name          string
	qHeads, heads int // query and KV heads
	dk, dv        int
	decayPerKey   bool
	betaShared    bool
}

// linearInputs are random inputs of a LinearAttention call of rule, in
// the operator's input order (nil for the inputs the rule takes not).
func (c linearConfig) inputs(rng *rand.Rand, dt DType, rule string, batch, steps int) []*value {
	r := linearRules[rule]
	decayWidth, betaWidth := c.heads, c.heads
	if c.decayPerKey {
		decayWidth = c.heads * c.dk
	}
	if c.betaShared {
		betaWidth = 1
	}
	in := []*value{
		randomFloats(rng, dt, []int{batch, steps, c.qHeads * c.dk}, -1, 1),
		randomFloats(rng, dt, []int{batch, steps, c.heads * c.dk}, -0.6, 0.6),
		randomFloats(rng, dt, []int{batch, steps, c.heads * c.dv}, -1, 1),
		randomFloats(rng, dt, []int{batch, c.heads, c.dk, c.dv}, -0.5, 0.5),
		nil, nil,
	}
	if r.gated {
		in[linDecay] = randomFloats(rng, dt, []int{batch, steps, decayWidth}, -1, 0)
	}
	if r.delta {
		in[linBeta] = randomFloats(rng, dt, []int{batch, steps, betaWidth}, 0, 1)
	}
	return in
}

// randomFloats returns a float32 or float64 value uniform in [lo, hi).
func randomFloats(rng *rand.Rand, dt DType, shape []int, lo, hi float64) *value {
	v := newValue(dt, shape)
	for i := range v.size() {
		x := lo + (hi-lo)*rng.Float64()
		switch d := v.data.(type) {
		case []float32:
			d[i] = float32(x)
		case []float64:
			d[i] = x
		}
	}
	return v
}

// token returns row t of a (batch, T, width) value as (batch, 1, width).
func token(v *value, t int) *value {
	b, steps, w := v.shape[0], v.shape[1], v.shape[2]
	out := newValue(v.dtype, []int{b, 1, w})
	for i := range b {
		src := subslice(v.data, (i*steps+t)*w, (i*steps+t+1)*w)
		switch d := out.data.(type) {
		case []float32:
			copy(d[i*w:], src.([]float32))
		case []float64:
			copy(d[i*w:], src.([]float64))
		}
	}
	return out
}

// linearAttentionModel is a graph of one LinearAttention node whose inputs
// are graph inputs of any shape; the names of absent inputs are "".
func linearAttentionModel(dt DType, names []string, attrs ...*onnxpb.AttributeProto) *onnxpb.ModelProto {
	var inputs []*onnxpb.ValueInfoProto
	for _, n := range names {
		if n != "" {
			inputs = append(inputs, untyped(n, onnxio.DataType(dt)))
		}
	}
	return graphSpec{opset: 27, inputs: inputs,
		outputs: []*onnxpb.ValueInfoProto{untyped("output", onnxio.DataType(dt)), untyped("present_state", onnxio.DataType(dt))},
		nodes:   []*onnxpb.NodeProto{nodeP("la", "LinearAttention", names, []string{"output", "present_state"}, attrs...)},
	}.model()
}

func stringAttr(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(v)}
}

// linearInputNames are the node's input names for the given inputs.
func linearInputNames(in []*value) []string {
	names := []string{"query", "key", "value", "past_state", "decay", "beta"}
	for i, v := range in {
		if v == nil {
			names[i] = ""
		}
	}
	for len(names) > 0 && names[len(names)-1] == "" {
		names = names[:len(names)-1]
	}
	return names
}

// TestLinearAttentionPrefillEqualsSteps checks, for every update rule, both
// gate layouts, GQA and MQA and both element types, that a prefill of T
// tokens from a past state gives exactly the outputs and the state of T
// one-token calls that carry present_state into past_state.
func TestLinearAttentionPrefillEqualsSteps(t *testing.T) {
	configs := []linearConfig{
		{name: "gqa_per_key_decay", qHeads: 4, heads: 2, dk: 3, dv: 5, decayPerKey: true},
		{name: "mqa_per_head_decay_shared_beta", qHeads: 3, heads: 1, dk: 4, dv: 2, betaShared: true},
		{name: "mha_shared_beta_per_key", qHeads: 2, heads: 2, dk: 2, dv: 3, decayPerKey: true, betaShared: true},
	}
	rng := rand.New(rand.NewPCG(27, 1))
	const batch, steps = 2, 6
	for _, dt := range []DType{Float32, Float64} {
		for _, c := range configs {
			for _, rule := range []string{"linear", "gated", "delta", "gated_delta"} {
				t.Run(fmt.Sprintf("%s/%s/%s", dt, c.name, rule), func(t *testing.T) {
					in := c.inputs(rng, dt, rule, batch, steps)
					names := linearInputNames(in)
					g, err := New(linearAttentionModel(dt, names, intAttr("q_num_heads", int64(c.qHeads)),
						intAttr("kv_num_heads", int64(c.heads)), stringAttr("update_rule", rule)))
					require.NoError(t, err)
					feed := func(in []*value) map[string]*value {
						m := map[string]*value{}
						for i, v := range in {
							if v != nil {
								m[names[i]] = v
							}
						}
						return m
					}
					prefill, err := g.run(feed(in))
					require.NoError(t, err)
					state := in[linPastState]
					for step := range steps {
						one := []*value{token(in[0], step), token(in[1], step), token(in[2], step), state, nil, nil}
						for _, k := range []int{linDecay, linBeta} {
							if in[k] != nil {
								one[k] = token(in[k], step)
							}
						}
						out, err := g.run(feed(one))
						require.NoError(t, err)
						require.Equal(t, token(prefill[0], step).data, out[0].data, "output of token %d", step)
						state = out[1]
					}
					require.Equal(t, prefill[1].data, state.data, "present_state")
					assert.Equal(t, []int{batch, c.heads, c.dk, c.dv}, state.shape)
					assert.Equal(t, []int{batch, steps, c.qHeads * c.dv}, prefill[0].shape)
				})
			}
		}
	}
}

// TestLinearAttentionRefusals checks what New refuses: attributes, and the
// decay and beta inputs a rule needs or forbids.
func TestLinearAttentionRefusals(t *testing.T) {
	heads := []*onnxpb.AttributeProto{intAttr("q_num_heads", 2), intAttr("kv_num_heads", 2)}
	qkv := []string{"query", "key", "value"}
	cases := []struct {
		name  string
		in    []string
		attrs []*onnxpb.AttributeProto
		err   string
	}{
		{"gated without decay", qkv, append(heads, stringAttr("update_rule", "gated")), `update_rule "gated" needs the decay input (input 4)`},
		{"default rule without beta", []string{"query", "key", "value", "", "decay"}, heads, `update_rule "gated_delta" needs the beta input (input 5)`},
		{"linear with decay", []string{"query", "key", "value", "", "decay"}, append(heads, stringAttr("update_rule", "linear")), `update_rule "linear" takes no decay input`},
		{"gated with beta", []string{"query", "key", "value", "", "decay", "beta"}, append(heads, stringAttr("update_rule", "gated")), `update_rule "gated" takes no beta input`},
		{"unknown rule", qkv, append(heads, stringAttr("update_rule", "rwkv7")), `update_rule "rwkv7" is not one of linear, gated, delta, gated_delta`},
		{"heads not a multiple", qkv, []*onnxpb.AttributeProto{intAttr("q_num_heads", 3), intAttr("kv_num_heads", 2), stringAttr("update_rule", "linear")},
			"q_num_heads (3) must be a positive multiple of kv_num_heads (2)"},
		{"no head counts", qkv, []*onnxpb.AttributeProto{stringAttr("update_rule", "linear")}, "needs the attributes q_num_heads and kv_num_heads"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(linearAttentionModel(Float32, c.in, c.attrs...))
			require.Error(t, err)
			assert.Contains(t, err.Error(), `node "la": op "LinearAttention" `+c.err)
		})
	}
	m := linearAttentionModel(Float32, qkv, append(heads, stringAttr("update_rule", "linear"))...)
	m.OpsetImport[0].Version = proto.Int64(26)
	_, err := New(m)
	assert.ErrorContains(t, err, `op "LinearAttention" (opset 26) is not supported: it is implemented from opset 27 on`)
}

// TestLinearAttentionShapeErrors checks that inputs that do not fit
// together are refused with the input named.
func TestLinearAttentionShapeErrors(t *testing.T) {
	f := func(d ...int) *value { return newValue(Float32, d) }
	a := func(rule string, q, kv int64) attrs {
		return attrs{"q_num_heads": aInt(q), "kv_num_heads": aInt(kv), "update_rule": {kind: attrString, s: rule}}
	}
	runOpCases(t, []opCase{
		{name: "query rank 2", op: "LinearAttention", attrs: a("linear", 2, 2), in: []*value{f(2, 8), f(2, 1, 8), f(2, 1, 8)},
			err: "query is float32 (2, 8); it must be rank 3"},
		{name: "query not divisible", op: "LinearAttention", attrs: a("linear", 2, 2), in: []*value{f(1, 1, 7), f(1, 1, 8), f(1, 1, 8)},
			err: "must be multiples of q_num_heads (2) and kv_num_heads (2)"},
		{name: "key head size", op: "LinearAttention", attrs: a("linear", 4, 2), in: []*value{f(1, 3, 8), f(1, 3, 6), f(1, 3, 6)},
			err: "key is float32 (1, 3, 6), want (1, 3, 4)"},
		{name: "value sequence", op: "LinearAttention", attrs: a("linear", 2, 2), in: []*value{f(1, 3, 8), f(1, 3, 8), f(1, 2, 8)},
			err: "value is float32 (1, 2, 8), want (1, 3, 8)"},
		{name: "value dtype", op: "LinearAttention", attrs: a("linear", 2, 2), in: []*value{f(1, 3, 8), f(1, 3, 8), newValue(Float64, []int{1, 3, 8})},
			err: "value is float64 (1, 3, 8), query is float32 (1, 3, 8): they must have the same element type"},
		{name: "past shape", op: "LinearAttention", attrs: a("linear", 2, 2), in: []*value{f(1, 3, 8), f(1, 3, 8), f(1, 3, 6), f(1, 2, 3, 4)},
			err: "past_state is float32 (1, 2, 3, 4), want (1, 2, 4, 3)"},
		{name: "decay width", op: "LinearAttention", attrs: a("gated", 2, 2), in: []*value{f(1, 3, 8), f(1, 3, 8), f(1, 3, 8), nil, f(1, 3, 3)},
			err: "decay is float32 (1, 3, 3), want (1, 3, 8) or (1, 3, 2)"},
		{name: "beta width", op: "LinearAttention", attrs: a("delta", 2, 2), in: []*value{f(1, 3, 8), f(1, 3, 8), f(1, 3, 8), nil, nil, f(1, 3, 4)},
			err: "beta is float32 (1, 3, 4), want (1, 3, 2) or (1, 3, 1)"},
		{name: "int query", op: "LinearAttention", attrs: a("linear", 1, 1), in: []*value{newValue(Int64, []int{1, 1, 2}), f(1, 1, 2), f(1, 1, 2)},
			err: "query is int64 (1, 1, 2); LinearAttention takes float32 or float64"},
	})
}

// TestLinearAttentionEmptyAndDefaults checks a call without tokens (the
// state passes through) and the default scale 1/√d_k against a hand
// computation.
func TestLinearAttentionEmptyAndDefaults(t *testing.T) {
	a := attrs{"q_num_heads": aInt(1), "kv_num_heads": aInt(1), "update_rule": {kind: attrString, s: "linear"}}
	past := f32(dims(1, 1, 2, 1), 3, 5)
	out, err := runOp(opCase{op: "LinearAttention", attrs: a, outs: 2,
		in: []*value{f32(dims(1, 0, 2)), f32(dims(1, 0, 2)), f32(dims(1, 0, 1)), past}})
	require.NoError(t, err)
	assertValue(t, f32(dims(1, 0, 1)), out[0])
	assertValue(t, past, out[1])

	// One token: S = past + k⊗v = [[3 + 1·2], [5 + 0·2]], o = qᵀS/√2.
	out, err = runOp(opCase{op: "LinearAttention", attrs: a, outs: 2,
		in: []*value{f32(dims(1, 1, 2), 1, 1), f32(dims(1, 1, 2), 1, 0), f32(dims(1, 1, 1), 2), past}})
	require.NoError(t, err)
	assertValue(t, f32(dims(1, 1, 1), float32(10/1.4142135623730951)), out[0])
	assertValue(t, f32(dims(1, 1, 2, 1), 5, 5), out[1])
}

// TestLinearAttentionRunContext checks that the recurrence stops when the
// run's context is cancelled and that its buffers come from the budget.
func TestLinearAttentionRunContext(t *testing.T) {
	spec := ops["LinearAttention"]
	n := &node{name: "la", op: "LinearAttention", spec: spec, out: []int{0, 1},
		attrs: attrs{"q_num_heads": aInt(2), "kv_num_heads": aInt(2), "update_rule": {kind: attrString, s: "linear"}}}
	in := linearConfig{qHeads: 2, heads: 2, dk: 16, dv: 16}.inputs(rand.New(rand.NewPCG(1, 1)), Float32, "linear", 2, 8)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := spec.run(newRunCtx(ctx, nil), n, in[:4])
	assert.ErrorIs(t, err, context.Canceled)
	_, err = spec.run(newRunCtx(context.Background(), budget.New(1024)), n, in[:4])
	assert.ErrorIs(t, err, budget.ErrExceeded)
	assert.ErrorContains(t, err, `float32 (2, 8, 32) needs 2 KiB`) // runNode adds the node's name
}
