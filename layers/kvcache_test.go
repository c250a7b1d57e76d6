package layers

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// role says how a step sees one of a layer's inputs.
type role int

const (
	// stream is the token stream: each step gets its new tokens.
	stream role = iota
	// whole is passed whole at every step: a cross-attention memory, or a
	// mask over the memory's keys only.
	whole
	// queryMask is a mask whose query axis (−2) follows the new tokens and
	// whose key axis covers the memory: cut to the step's rows.
	queryMask
	// causalMask is a mask over queries (−2) and keys (−1) of the stream:
	// cut to the step's rows and to the keys so far.
	causalMask
	// keyMask is a key-padding mask over the stream's keys (last axis): cut
	// to the keys so far.
	keyMask
)

// stepSpec says how a layer runs incrementally on a test's inputs.
type stepSpec struct {
	roles []role
	// seqFirst: the token axis of the stream and the output is the first,
	// (T, B, d) as nn.MultiheadAttention without batch_first; otherwise it
	// is the second to last, (T, d) or (B, T, d).
	seqFirst bool
	// keyOutput: the output's last axis is the keys so far (position.alibi).
	keyOutput bool
	// extraKeys: the weights have keys after the stream's (bias_k, zero
	// attention), so their columns are not a prefix of the full pass's.
	extraKeys bool
	// exact, if set, is the module's output computed in float64 (rounded
	// to float32): a step row off PyTorch's float32 output by more than
	// 1e-5/1e-6 then passes by the float64 rule of docs/crosscheck.md.
	exact *tensor.Dense
	// err, if set, is what Step must fail with.
	err string
	// skip, if set, says why the case is not stepped.
	skip string
}

// goldenSteps classifies every case of modern_cases.json for incremental
// decoding: how its inputs step, or why it cannot.
var goldenSteps = map[string]stepSpec{
	"sdpa_plain":                    {roles: []role{stream}, err: "non-causal"},
	"sdpa_causal_gqa":               {roles: []role{stream}},
	"sdpa_mqa_unbatched":            {roles: []role{stream}},
	"sdpa_keep_mask":                {skip: "its mask lets queries see later keys, which a step has not seen"},
	"sdpa_drop_mask_nan":            {skip: "its mask lets queries see later keys, which a step has not seen"},
	"sdpa_additive_mask":            {roles: []role{stream, causalMask}},
	"sdpa_cross_bottom_right":       {roles: []role{stream, whole}, err: "top_left"},
	"sdpa_cross_top_left":           {roles: []role{stream, whole}},
	"sdpa_cross_more_queries":       {roles: []role{stream, whole}, err: "top_left"},
	"sdpa_cross_key_padding":        {roles: []role{stream, whole, queryMask}},
	"sdpa_softcap":                  {roles: []role{stream}},
	"sdpa_window":                   {roles: []role{stream}},
	"sdpa_window_centred":           {roles: []role{stream}, err: "centred on the query"},
	"sdpa_rope_half":                {roles: []role{stream}},
	"sdpa_rope_interleaved_partial": {roles: []role{stream}},
	"sdpa_alibi":                    {roles: []role{stream}},
	"sdpa_everything":               {roles: []role{stream, causalMask}},
	"mha_self_batch_first":          {roles: []role{stream}, err: "attn_mask"},
	"mha_seq_first_masks":           {roles: []role{stream, whole, whole, queryMask}, seqFirst: true},
	"mha_kdim_vdim_extras":          {roles: []role{stream, whole, whole, whole, queryMask}, extraKeys: true},
	"mha_unbatched":                 {roles: []role{stream, whole, whole}, extraKeys: true},
	"mha_nan_rows":                  {roles: []role{stream, keyMask}, err: "attn_mask"},
	"mha_float_key_padding":         {roles: []role{stream, keyMask}, err: "attn_mask"},
	"mha_causal_bias_kv":            {roles: []role{stream, causalMask}, extraKeys: true},
	"sinusoidal":                    {roles: []role{stream}},
	"sinusoidal_odd_base":           {roles: []role{stream}},
	"rope_half":                     {roles: []role{stream}},
	"rope_interleaved_partial":      {roles: []role{stream}},
	"alibi_6":                       {roles: []role{stream}, keyOutput: true},
	"alibi_8_causal":                {roles: []role{stream}, keyOutput: true},
	"layer_norm":                    {roles: []role{stream}},
	"layer_norm_plain":              {roles: []role{stream}},
	"rms_norm":                      {roles: []role{stream}},
	"rms_norm_eps":                  {roles: []role{stream}},
	"gelu":                          {roles: []role{stream}},
	"gelu_tanh":                     {roles: []role{stream}},
	"mlp_fc_gelu":                   {roles: []role{stream}},
	"mlp_fc_relu_nobias":            {roles: []role{stream}},
	"mlp_gated_silu":                {roles: []role{stream}},
	"mlp_gated_gelu_tanh":           {roles: []role{stream}},
}

// TestGoldenCasesStep feeds every PyTorch case that can run incrementally
// token by token and in chunks: each step's rows must equal PyTorch's
// full-sequence output, and its weights the full pass's.
func TestGoldenCasesStep(t *testing.T) {
	names, cases := modernCases(t)
	for _, name := range names {
		spec, ok := goldenSteps[name]
		require.True(t, ok, "case %s is not classified in goldenSteps", name)
		if spec.skip != "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			c := cases[name]
			l := c.layer(t)
			checkSteps(t, l, c.inputs(), spec, c.Output.dense())
		})
	}
}

// checkSteps runs l on inputs whole, then in several splits of the stream
// (token by token, and chunks of 2 and 3), and requires every step's output
// to equal the rows of want (nil: l's own full output) and its attention
// weights to equal the full pass's rows. A token-wise layer is stepped with
// Forward.
func checkSteps(t *testing.T, l registry.Layer, inputs []*tensor.Dense, spec stepSpec, want *tensor.Dense) {
	t.Helper()
	var fullWeights *tensor.Dense
	full, err := l.Forward(&registry.Run{Hook: func(_ string, w *tensor.Dense) { fullWeights = w }}, inputs)
	require.NoError(t, err)
	if want == nil {
		want = full
	}
	axis := len(inputs[0].Shape()) - 2
	if spec.seqFirst {
		axis = 0
	}
	tokens := inputs[0].Shape()[axis]
	stepper, isStepper := l.(registry.Stepper)
	_, isTokenWise := l.(registry.TokenWise)
	require.True(t, isStepper || isTokenWise, "%T can neither step nor is token-wise", l)

	for _, split := range splits(tokens) {
		var state registry.State
		if isStepper {
			state = stepper.NewState()
		}
		t0 := 0
		for _, n := range split {
			t1 := t0 + n
			args := make([]*tensor.Dense, len(inputs))
			for i, x := range inputs {
				args[i] = stepInput(x, spec.roles[i], axis, t0, t1)
			}
			var weights *tensor.Dense
			run := &registry.Run{Hook: func(_ string, w *tensor.Dense) { weights = w }}
			var out *tensor.Dense
			if isStepper {
				out, err = stepper.Step(run, state, args)
			} else {
				out, err = l.Forward(run, args)
			}
			if spec.err != "" {
				require.ErrorContains(t, err, spec.err)
				return
			}
			require.NoError(t, err, "step %d:%d of split %v", t0, t1, split)
			if isStepper {
				require.Equal(t, t1, state.Tokens())
			}
			outAxis := axis
			if spec.keyOutput {
				outAxis = len(want.Shape()) - 2
			}
			rows := sliceAxis(want, outAxis, t0, t1)
			if spec.keyOutput {
				rows = sliceAxis(rows, len(want.Shape())-1, 0, t1)
			}
			require.Equal(t, []int(rows.Shape()), []int(out.Shape()), "step %d:%d output shape", t0, t1)
			if spec.exact != nil {
				exact := sliceAxis(spec.exact, outAxis, t0, t1)
				assertCloseOrFloat64(t, floats(rows), floats(exact), floats(out), float64RuleBound(floats(want), floats(spec.exact)), "step output")
			} else {
				assertCloseNaN(t, floats(rows), floats(out), torchAbs, torchRel, "step output")
			}
			if fullWeights != nil && !spec.extraKeys {
				require.NotNil(t, weights, "step reported no weights")
				wantW := sliceAxis(fullWeights, 2, t0, t1)
				if weights.Shape()[3] != fullWeights.Shape()[3] { // self-attention: the keys so far
					wantW = sliceAxis(wantW, 3, 0, t1)
				}
				assertCloseNaN(t, floats(wantW), floats(weights), torchAbs, torchRel, "step weights")
			}
			t0 = t1
		}
	}
}

// splits returns ways to feed n tokens: one at a time, in chunks of 2 and
// 3, and all at once.
func splits(n int) [][]int {
	ones := make([]int, n)
	for i := range ones {
		ones[i] = 1
	}
	var mixed []int
	for left, i := n, 0; left > 0; i++ {
		c := min(left, 2+i%2)
		mixed = append(mixed, c)
		left -= c
	}
	return [][]int{ones, mixed, {n}}
}

// stepInput cuts a step's part of a full input: rows t0..t1 of the token
// axis of the stream, and the parts of masks that the step's queries and
// keys so far cover.
func stepInput(x *tensor.Dense, r role, axis, t0, t1 int) *tensor.Dense {
	rank := len(x.Shape())
	cut := func(x *tensor.Dense, axis, lo, hi int) *tensor.Dense {
		if x.Shape()[axis] == 1 { // a broadcast axis
			return x
		}
		return sliceAxis(x, axis, lo, hi)
	}
	switch r {
	case stream:
		return sliceAxis(x, axis, t0, t1)
	case queryMask:
		return cut(x, rank-2, t0, t1)
	case causalMask:
		return cut(cut(x, rank-2, t0, t1), rank-1, 0, t1)
	case keyMask:
		return cut(x, rank-1, 0, t1)
	}
	return x
}

// sliceAxis copies x[..., lo:hi, ...] along axis.
func sliceAxis(x *tensor.Dense, axis, lo, hi int) *tensor.Dense {
	shape := []int(x.Shape().Clone())
	outer, inner := volume(shape[:axis]), volume(shape[axis+1:])
	data := floats(x)
	out := make([]float32, 0, outer*(hi-lo)*inner)
	for o := range outer {
		base := o * shape[axis] * inner
		out = append(out, data[base+lo*inner:base+hi*inner]...)
	}
	shape[axis] = hi - lo
	return newDense(shape, out)
}

// TestStepEqualsForward steps the causal layers (with random weights), in
// configurations beyond the PyTorch cases, and compares with their own
// full pass.
func TestStepEqualsForward(t *testing.T) {
	x := func(shape ...int) *tensor.Dense { return randomDense(rand.New(rand.NewPCG(7, 8)), shape...) }
	tests := []struct {
		name   string
		layer  registry.Layer
		inputs []*tensor.Dense
		spec   stepSpec
	}{
		{"causal", &Causal{DIn: 4, DOut: 3, ContextLength: 8, QKVBias: true}, []*tensor.Dense{x(2, 7, 4)}, stepSpec{}},
		{"causal unbatched", &Causal{DIn: 4, DOut: 3, ContextLength: 8}, []*tensor.Dense{x(6, 4)}, stepSpec{}},
		{"multihead_wrapper", &MultiHeadWrapper{DIn: 4, DOut: 2, ContextLength: 8, NumHeads: 3}, []*tensor.Dense{x(2, 7, 4)}, stepSpec{}},
		{"multihead", &MultiHead{DIn: 4, DOut: 6, ContextLength: 8, NumHeads: 2, OutBias: true, Causal: true}, []*tensor.Dense{x(2, 7, 4)}, stepSpec{}},
		{"multihead non-causal", &MultiHead{DIn: 4, DOut: 6, ContextLength: 8, NumHeads: 2}, []*tensor.Dense{x(2, 7, 4)}, stepSpec{err: "non-causal"}},
		{"average", &Average{}, []*tensor.Dense{x(2, 7, 3)}, stepSpec{}},
		{"learned position", &LearnedPosition{ContextLength: 8, D: 3}, []*tensor.Dense{x(2, 7, 3)}, stepSpec{}},
		{"linear", &Linear{DIn: 3, DOut: 2, Bias: true}, []*tensor.Dense{x(2, 7, 3)}, stepSpec{}},
		{"add", &Add{}, []*tensor.Dense{x(2, 7, 3), x(2, 7, 3)}, stepSpec{roles: []role{stream, stream}}},
		{"concat", &Concat{}, []*tensor.Dense{x(2, 7, 3), x(2, 7, 2)}, stepSpec{roles: []role{stream, stream}}},
		{"sdpa window 1", sdpa(func(s *SDPA) { s.Causal, s.Window = true, 1 }), []*tensor.Dense{x(2, 7, 8)}, stepSpec{}},
		{"sdpa window 2, GQA, RoPE, ALiBi, softcap", sdpa(func(s *SDPA) {
			s.NumKVHeads, s.Causal, s.Window, s.RoPE, s.ALiBi, s.Softcap = 1, true, 2, "interleaved", true, 3
		}), []*tensor.Dense{x(2, 9, 8)}, stepSpec{}},
		{"sdpa masked rows nan", sdpa(func(s *SDPA) {
			s.Causal, s.Mask, s.MaskPolarity, s.MaskedRows = true, "bool", "keep", "nan"
		}), []*tensor.Dense{x(2, 6, 8), keyPadding(2, 6, 1, 3)}, stepSpec{roles: []role{stream, keyMask}}},
		{"sdpa cross non-causal", sdpa(func(s *SDPA) { s.DMemory = 5 }), []*tensor.Dense{x(2, 6, 8), x(2, 4, 5)}, stepSpec{roles: []role{stream, whole}}},
		{"sdpa non-causal", sdpa(func(s *SDPA) {}), []*tensor.Dense{x(2, 6, 8)}, stepSpec{err: "non-causal"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := validated(t, tt.layer, 5)
			spec := tt.spec
			if spec.roles == nil {
				spec.roles = []role{stream}
			}
			checkSteps(t, l, tt.inputs, spec, nil)
		})
	}
}

// sdpa returns a 2-head attention.sdpa of width 8 with its defaults,
// changed by set.
func sdpa(set func(*SDPA)) *SDPA {
	info, _ := registry.Lookup("attention.sdpa")
	s := info.New().(*SDPA)
	s.D, s.NumHeads = 8, 2
	set(s)
	return s
}

// keyPadding is a (B, 1, 1, T) keep-mask in which sequence b's first
// padded[b] tokens are padding (left padding).
func keyPadding(b, t int, padded ...int) *tensor.Dense {
	data := make([]float32, b*t)
	for i := range b {
		for j := range t {
			if j >= padded[i] {
				data[i*t+j] = 1
			}
		}
	}
	return newDense([]int{b, 1, 1, t}, data)
}

// TestStepStateRules checks the errors a step reports and that a failed
// step leaves the state as it was.
func TestStepStateRules(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	l := validated(t, sdpa(func(s *SDPA) { s.Causal = true }), 1).(*SDPA)
	state := l.NewState()
	_, err := l.Step(nil, state, []*tensor.Dense{randomDense(rng, 2, 3, 8)})
	require.NoError(t, err)

	_, err = l.Step(nil, state, []*tensor.Dense{randomDense(rng, 3, 1, 8)})
	require.ErrorContains(t, err, "step has 3 sequence(s), the session started with 2")
	_, err = l.Step(nil, state, []*tensor.Dense{randomDense(rng, 2, 1, 5)})
	require.ErrorContains(t, err, "d mismatch")
	_, err = l.Step(nil, &positionState{}, []*tensor.Dense{randomDense(rng, 2, 1, 8)})
	require.ErrorContains(t, err, "not from this layer's NewState")
	require.Equal(t, 3, state.Tokens(), "a failed step changed the state")

	c := validated(t, &Causal{DIn: 8, DOut: 2, ContextLength: 4}, 1).(*Causal)
	cs := c.NewState()
	_, err = c.Step(nil, cs, []*tensor.Dense{randomDense(rng, 3, 8)})
	require.NoError(t, err)
	_, err = c.Step(nil, cs, []*tensor.Dense{randomDense(rng, 2, 8)})
	require.ErrorContains(t, err, "sequence length 5 exceeds context_length 4")
	require.Equal(t, 3, cs.Tokens())
	require.Equal(t, 3, cs.(*attentionState).caches[0].len(), "a failed step grew the cache")

	masked := validated(t, sdpa(func(s *SDPA) { s.Causal, s.Mask = true, "additive" }), 1).(*SDPA)
	ms := masked.NewState()
	_, err = masked.Step(nil, ms, []*tensor.Dense{randomDense(rng, 1, 2, 8), randomDense(rng, 2, 3)})
	require.ErrorContains(t, err, "does not broadcast to (B, H, Tq, Tk) = (1, 2, 2, 2)")
	require.Equal(t, 0, ms.Tokens())
	// A failed first step does not fix the batch size.
	_, err = masked.Step(nil, ms, []*tensor.Dense{randomDense(rng, 3, 2, 8), newDense([]int{2, 2}, make([]float32, 4))})
	require.NoError(t, err)
	_, err = masked.Step(nil, ms, []*tensor.Dense{randomDense(rng, 3, 1, 8), newDense([]int{1, 3}, make([]float32, 3))})
	require.NoError(t, err)
	require.Equal(t, 3, ms.Tokens())

	for _, l := range []registry.Stepper{
		validated(t, &MultiHead{DIn: 8, DOut: 4, ContextLength: 8, NumHeads: 2, Causal: true, Dropout: 0.5}, 1).(registry.Stepper),
		validated(t, fromYAML(t, "attention.torch_mha", "{embed_dim: 8, num_heads: 2, dropout: 0.5, attn_mask: bool, batch_first: true}"), 1).(registry.Stepper),
	} {
		withMask := func(x *tensor.Dense) []*tensor.Dense {
			if _, ok := l.(*TorchMHA); ok {
				return []*tensor.Dense{x, newDense([]int{2, 2}, make([]float32, 4))}
			}
			return []*tensor.Dense{x}
		}
		st := l.NewState()
		_, err = l.Step(&registry.Run{Train: true}, st, withMask(randomDense(rng, 1, 2, 8)))
		require.ErrorContains(t, err, "needs run.RNG", "%T", l)
		_, err = l.Step(nil, st, withMask(randomDense(rng, 3, 2, 8)))
		require.NoError(t, err, "%T: a failed first step fixed the batch size", l)
	}
}

// TestSlidingWindowCacheIsBounded checks that a sliding-window layer's
// cache holds no more than window−1 keys between steps.
func TestSlidingWindowCacheIsBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	l := validated(t, sdpa(func(s *SDPA) { s.Causal, s.Window = true, 3 }), 1).(*SDPA)
	state := l.NewState()
	for range 10 {
		_, err := l.Step(nil, state, []*tensor.Dense{randomDense(rng, 1, 2, 8)})
		require.NoError(t, err)
		cache := state.(*attentionState).caches[0]
		require.Equal(t, 2, cache.len())
		require.Equal(t, state.Tokens()-2, cache.start)
	}
}

// float64RuleBound is the float64 rule's bound (docs/crosscheck.md) for a
// float32 result that PyTorch's float32 output want misses the float64
// output exact by: twice PyTorch's largest distance from it, plus 1e-6.
func float64RuleBound(want, exact []float32) float64 {
	var e float64
	for i := range want {
		e = max(e, math.Abs(float64(want[i])-float64(exact[i])))
	}
	return 2*e + 1e-6
}

// assertCloseOrFloat64 checks got against want within 1e-5/1e-6 and,
// where an element is further, against exact (the float64 module) within
// bound: two correct float32 implementations of a computation that
// cancels (the delta rule's β(v − Sᵀk)) stray from each other by more
// than 1e-6 and from the exact result alike.
func assertCloseOrFloat64(t *testing.T, want, exact, got []float32, bound float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if math.Abs(g-w) <= torchAbs+torchRel*math.Abs(w) {
			continue
		}
		if diff := math.Abs(g - float64(exact[i])); diff > bound {
			require.Failf(t, msg, "element %d: got %.7g, want %.7g (PyTorch float32) or within %.3g of %.7g (float64), %.3g from it", i, g, w, bound, exact[i], diff)
		}
	}
}
