package exec

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

const flexOp = "ai.onnx.preview.FlexAttention"

// TestFlexAttentionByHand checks one query against a hand computation:
// scores scale·q·k = (2, 0) with the default scale 1/√1, softmax
// (e²/(e²+1), 1/(e²+1)), times V.
func TestFlexAttentionByHand(t *testing.T) {
	out, err := runOp(opCase{op: flexOp, in: []*value{
		f32(dims(1, 1, 1, 1), 2), f32(dims(1, 1, 2, 1), 1, 0), f32(dims(1, 1, 2, 2), 10, 1, 20, 2),
	}})
	require.NoError(t, err)
	w := math.Exp(2) / (math.Exp(2) + 1)
	assertValue(t, f32(dims(1, 1, 1, 2), float32(10*w+20*(1-w)), float32(w+2*(1-w))), out[0])

	// An explicit scale 0.5 and softmax_precision double on float32 inputs.
	out, err = runOp(opCase{op: flexOp, attrs: attrs{"scale": aFloat(0.5), "softmax_precision": aInt(int64(Float64))}, in: []*value{
		f32(dims(1, 1, 1, 1), 2), f32(dims(1, 1, 2, 1), 1, 0), f32(dims(1, 1, 2, 2), 10, 1, 20, 2),
	}})
	require.NoError(t, err)
	w = math.E / (math.E + 1)
	assertValue(t, f32(dims(1, 1, 1, 2), float32(10*w+20*(1-w)), float32(w+2*(1-w))), out[0])
}

// TestFlexAttentionShapeErrors checks that inputs that do not fit together
// are refused with the input named.
func TestFlexAttentionShapeErrors(t *testing.T) {
	f := func(d ...int) *value { return newValue(Float32, d) }
	runOpCases(t, []opCase{
		{name: "rank 3", op: flexOp, in: []*value{f(1, 2, 3), f(1, 1, 2, 3), f(1, 1, 2, 3)}, err: "input Q is float32 (1, 2, 3); it must be rank 4"},
		{name: "head size", op: flexOp, in: []*value{f(1, 1, 2, 3), f(1, 1, 2, 4), f(1, 1, 2, 3)}, err: "input K is float32 (1, 1, 2, 4), want (1, kv_heads, kv_len, 3)"},
		{name: "value length", op: flexOp, in: []*value{f(1, 1, 2, 3), f(1, 1, 4, 3), f(1, 1, 5, 3)}, err: "input V is float32 (1, 1, 5, 3), want (1, 1, 4, v_head_size)"},
		{name: "heads", op: flexOp, in: []*value{f(1, 3, 2, 3), f(1, 2, 4, 3), f(1, 2, 4, 3)}, err: "input Q has 3 heads and K 2: the query heads must be a multiple of the key heads"},
		{name: "dtypes", op: flexOp, in: []*value{f(1, 1, 2, 3), newValue(Float64, []int{1, 1, 4, 3}), f(1, 1, 4, 3)},
			err: "input K is float64 (1, 1, 4, 3) and Q float32 (1, 1, 2, 3): they must have the same element type"},
	})
}

// TestFlexAttentionModifierErrors checks the run-time checks of a
// modifier's result and arguments.
func TestFlexAttentionModifierErrors(t *testing.T) {
	qkv := []string{"Q", "K", "V"}
	in := map[string]*value{"Q": newValue(Float32, []int{1, 1, 2, 3}), "K": newValue(Float32, []int{1, 1, 4, 3}), "V": newValue(Float32, []int{1, 1, 4, 3})}
	transpose := graphAttr("score_mod", modGraph("s", "s_out", onnxio.Float, nodeP("", "Transpose", []string{"s"}, []string{"s_out"}, intsAttr("perm", 0, 1, 3, 2))))
	g, err := New(previewModel(qkv, flexNode("flex", qkv, "Y", transpose)))
	require.NoError(t, err)
	_, err = g.run(in)
	assert.ErrorContains(t, err, `node "flex" (ai.onnx.preview.FlexAttention): subgraph "score_mod" returned float32 (1, 1, 4, 2) for its input float32 (1, 1, 2, 4); a modifier keeps the element type and shape`)

	// The modifier is declared float32 but softmax_precision makes its input float64.
	g, err = New(previewModel(qkv, flexNode("flex", qkv, "Y", intAttr("softmax_precision", int64(Float64)), addBias("Q"))))
	require.NoError(t, err)
	_, err = g.run(in)
	assert.ErrorContains(t, err, `subgraph "score_mod": input "s": dtype float64, the subgraph declares s float32`)

	// A failing node inside the body is named, with the body.
	g, err = New(previewModel(qkv, flexNode("flex", qkv, "Y", addBias("Q"))))
	require.NoError(t, err)
	_, err = g.run(in)
	assert.ErrorContains(t, err, `node "flex" (ai.onnx.preview.FlexAttention): subgraph "score_mod": node #0 (Add): `)
}

// TestFlexAttentionRunContext checks that a cancelled run stops between
// heads and that the scores come from the budget.
func TestFlexAttentionRunContext(t *testing.T) {
	spec := ops[flexOp]
	n := &node{name: "flex", op: flexOp, spec: spec, out: []int{0}, attrs: attrs{}}
	rng := rand.New(rand.NewPCG(1, 2))
	in := []*value{
		randomFloats(rng, Float32, []int{1, 2, 16, 8}, -1, 1),
		randomFloats(rng, Float32, []int{1, 2, 32, 8}, -1, 1),
		randomFloats(rng, Float32, []int{1, 2, 32, 8}, -1, 1),
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := spec.run(newRunCtx(ctx, nil), n, in)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = spec.run(newRunCtx(context.Background(), budget.New(1024)), n, in)
	assert.ErrorIs(t, err, budget.ErrExceeded)
	assert.ErrorContains(t, err, `float32 (1, 2, 16, 32) needs 4 KiB`) // runNode adds the node's name
}

// TestSwiGLU checks values by hand and the refusals of inputs that differ.
func TestSwiGLU(t *testing.T) {
	silu := func(x, alpha float64) float32 { return float32(x / (1 + math.Exp(-alpha*x))) }
	runOpCases(t, []opCase{
		{name: "default alpha", op: "SwiGLU", in: []*value{f32(dims(3), -2, 0, 3), f32(dims(3), 2, 5, -1)},
			want: []*value{f32(dims(3), 2*silu(-2, 1), 0, -silu(3, 1))}},
		{name: "alpha", op: "SwiGLU", attrs: attrs{"alpha": aFloat(1.5)}, in: []*value{f64(dims(1, 2), 1, -100), f64(dims(1, 2), 3, 1)},
			want: []*value{f64(dims(1, 2), 3/(1+math.Exp(-1.5)), -100/(1+math.Exp(150)))}},
		{name: "shapes differ", op: "SwiGLU", in: []*value{f32(dims(2), 1, 2), f32(dims(1), 1)},
			err: "inputs A float32 (2,) and B float32 (1,) differ in shape; SwiGLU does not broadcast"},
		{name: "dtypes differ", op: "SwiGLU", in: []*value{f32(dims(1), 1), f64(dims(1), 1)},
			err: "input B is float64 (1,) and A float32 (1,): they must have the same element type"},
		{name: "integers", op: "SwiGLU", in: []*value{i64(dims(1), 1), i64(dims(1), 1)}, err: "float32 or float64"},
	})
	_, err := New(graphSpec{opset: 27, inputs: []*onnxpb.ValueInfoProto{untyped("a", onnxio.Float), untyped("b", onnxio.Float)},
		outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
		nodes:   []*onnxpb.NodeProto{nodeP("s", "SwiGLU", []string{"a", "b"}, []string{"y"})}}.model())
	assert.ErrorContains(t, err, `op "SwiGLU" (opset 27) is not supported: it is implemented from opset 28 on`)
}
