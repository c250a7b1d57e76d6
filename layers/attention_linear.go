package layers

import (
	"fmt"
	"math"
	"slices"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// LinearAttention is attention.linear: linear attention as Hugging Face's
// Qwen3-Next writes its gated DeltaNet layer (Qwen3NextGatedDeltaNet), with
// the update rule of the recurrent state to choose. For each token:
//
//	q, k, v, z  = in_proj_qkvz(x)                projections; z gates the output
//	q, k, v     = silu(conv1d(q, k, v))          causal depthwise conv over time
//	q, k        = q/‖q‖, k/‖k‖ (qk_l2norm),  q = q/√head_k_dim
//	β           = sigmoid(b),  g = −exp(A_log)·softplus(a + dt_bias)   b, a = in_proj_ba(x)
//
// then, per value head, a head_k_dim × head_v_dim state S (zeros before
// the first token) is updated and read:
//
//	linear:       S = S + k vᵀ
//	gated:        S = exp(g)·S + k vᵀ
//	delta:        S = S + k (β(v − Sᵀk))ᵀ
//	gated_delta:  S' = exp(g)·S,  S = S' + k (β(v − S'ᵀk))ᵀ
//	o           = Sᵀq
//
// and the output is out_proj(RMSNorm(o)·weight·silu(z)), the RMSNorm over
// each head's head_v_dim values (Qwen3NextRMSNormGated). gated_delta is
// Qwen3-Next's rule (Yang et al., Gated Delta Networks); the others are the
// same block with the rule swapped: the decay g exists for the gated rules
// (with dt_bias and A_log), the write strength β for the delta rules, and
// the projection of b and a holds only what the rule uses (in_proj_ba,
// in_proj_b, in_proj_a, or none for linear).
//
// Heads: num_heads value heads, each with its state, and num_key_heads
// query/key heads (default num_heads), which must divide it: each query/key
// head serves num_heads/num_key_heads consecutive value heads (Qwen3-Next's
// linear_num_key_heads and linear_num_value_heads; the grouping of
// grouped-query attention seen from the values' side). in_proj_qkvz and
// in_proj_ba are laid out by query/key head: for each, its q, k, the v of
// its value heads and their z (and their b, then their a).
//
// The output at a token depends only on the tokens up to it: the layer is
// a Stepper whose state is the convolution's last conv_kernel_size−1 inputs
// and the recurrent states, and Forward is the recurrence from empty
// states, token by token (Hugging Face's torch_recurrent_gated_delta_rule;
// its chunked prefill computes the same in another order). Sums over a
// head are accumulated in float64.
type LinearAttention struct {
	// D is the width of the input and output tokens.
	D int `yaml:"d"`
	// NumHeads is the number of value heads, each with its own state.
	NumHeads int `yaml:"num_heads"`
	// NumKeyHeads is the number of query/key heads (default num_heads); it
	// must divide num_heads.
	NumKeyHeads int `yaml:"num_key_heads"`
	// HeadKDim is the width of a query/key head (default d/num_heads).
	HeadKDim int `yaml:"head_k_dim"`
	// HeadVDim is the width of a value head (default d/num_heads).
	HeadVDim int `yaml:"head_v_dim"`
	// UpdateRule is "linear", "gated", "delta" or "gated_delta" (default).
	UpdateRule string `yaml:"update_rule"`
	// ConvKernelSize is the length of the causal convolution (default 4,
	// Qwen3-Next's linear_conv_kernel_dim; 1 is a per-channel scale).
	ConvKernelSize int `yaml:"conv_kernel_size"`
	// QKL2Norm divides each query and key head by its L2 norm (default
	// true, as Qwen3-Next). The delta rules need it: with unit keys and
	// β in (0, 1) the update I − βkkᵀ cannot amplify the state.
	QKL2Norm bool `yaml:"qk_l2norm"`
	// Eps is the gated RMSNorm's epsilon (default 1e-6, rms_norm_eps).
	Eps float64 `yaml:"eps"`

	c *linearPrepared
}

var (
	_ registry.Provisioner  = (*LinearAttention)(nil)
	_ registry.Stepper      = (*LinearAttention)(nil)
	_ registry.FLOPCounter  = (*LinearAttention)(nil)
	_ registry.OutputShaper = (*LinearAttention)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "attention.linear",
		Summary: "linear attention with a recurrent state (Qwen3-Next's gated DeltaNet block): update_rule linear, gated, delta or gated_delta, short causal conv, gated RMSNorm",
		New: func() registry.Layer {
			return &LinearAttention{UpdateRule: "gated_delta", ConvKernelSize: 4, QKL2Norm: true, Eps: 1e-6}
		},
	})
}

// updateRule is what an update rule does to the state: decay it (gated)
// and write the correction v − Sᵀk instead of v (delta).
type updateRule struct{ gated, delta bool }

// updateRules are the rules by name.
var updateRules = map[string]updateRule{
	"linear":      {},
	"gated":       {gated: true},
	"delta":       {delta: true},
	"gated_delta": {gated: true, delta: true},
}

// name is the rule's name in update_rule.
func (r updateRule) name() string {
	for name, rule := range updateRules {
		if rule == r {
			return name
		}
	}
	return ""
}

// l2NormEps is the epsilon of the query and key L2 normalization, fixed in
// Hugging Face's l2norm (and the FLA kernels): x·rsqrt(Σx² + 1e-6).
const l2NormEps = 1e-6

// linearSizes are a LinearAttention's sizes with the defaults resolved.
type linearSizes struct {
	d, heads, keyHeads, group int
	dk, dv                    int
	keyDim, valueDim, convDim int
	kernel                    int
	rule                      updateRule
	// gateWidth is the width of the b/a projection: 2·heads
	// (gated_delta), heads (delta, gated) or 0 (linear).
	gateWidth int
}

// sizes validates the size fields and the rule, in field order, and
// resolves their defaults.
func (l *LinearAttention) sizes() (linearSizes, error) {
	s := linearSizes{d: l.D, heads: l.NumHeads, keyHeads: l.NumKeyHeads, dk: l.HeadKDim, dv: l.HeadVDim, kernel: l.ConvKernelSize}
	if err := firstError(positive("d", l.D), positive("num_heads", l.NumHeads)); err != nil {
		return s, err
	}
	if s.heads > maxHeads {
		return s, fmt.Errorf("num_heads %d is above the limit of %d", s.heads, maxHeads)
	}
	if s.keyHeads == 0 {
		s.keyHeads = s.heads
	}
	if s.keyHeads < 0 || s.heads%s.keyHeads != 0 {
		return s, fmt.Errorf("num_key_heads %d does not divide num_heads %d", s.keyHeads, s.heads)
	}
	s.group = s.heads / s.keyHeads
	for _, f := range []struct {
		name string
		v    *int
	}{{"head_k_dim", &s.dk}, {"head_v_dim", &s.dv}} {
		switch {
		case *f.v < 0:
			return s, fmt.Errorf("%s must be positive, got %d", f.name, *f.v)
		case *f.v == 0 && l.D%s.heads != 0:
			return s, fmt.Errorf("num_heads %d does not divide d %d (or set %s)", s.heads, l.D, f.name)
		case *f.v == 0:
			*f.v = l.D / s.heads
		}
	}
	if s.dk > maxElements/s.heads || s.dv > maxElements/s.heads || s.dk > maxElements/s.dv {
		return s, fmt.Errorf("head_k_dim %d and head_v_dim %d with num_heads %d are above the limit of %d elements", s.dk, s.dv, s.heads, maxElements)
	}
	s.keyDim, s.valueDim = s.keyHeads*s.dk, s.heads*s.dv
	s.convDim = 2*s.keyDim + s.valueDim
	rule, ok := updateRules[l.UpdateRule]
	if !ok {
		return s, fmt.Errorf("update_rule %q is not \"linear\", \"gated\", \"delta\" or \"gated_delta\"", l.UpdateRule)
	}
	s.rule = rule
	switch {
	case rule.gated && rule.delta:
		s.gateWidth = 2 * s.heads
	case rule.gated || rule.delta:
		s.gateWidth = s.heads
	}
	if s.kernel < 1 {
		return s, fmt.Errorf("conv_kernel_size must be positive, got %d", s.kernel)
	}
	if s.kernel > maxElements/s.convDim {
		return s, fmt.Errorf("conv_kernel_size %d is above the limit of %d elements", s.kernel, maxElements)
	}
	return s, nil
}

// linearPrepared is what Validate prepared; Forward and Step read only this.
type linearPrepared struct {
	linearSizes
	l2norm bool
	eps    float64
	// qkvz is in_proj_qkvz, gateProj in_proj_ba, in_proj_b or in_proj_a
	// (named gateName; nil for the linear rule), out out_proj.
	qkvz, gateProj, out *linearWeights
	gateName            string
	// dtBias and aLog (num_heads; nil for the ungated rules), conv
	// (conv_dim, 1, kernel) and norm (head_v_dim).
	dtBias, aLog, conv, norm *tensor.Dense
}

// Validate checks every field (see the type's documentation) and
// allocates zeroed parameters.
func (l *LinearAttention) Validate() error { return l.Provision(nil) }

// PlanParams lists the parameters without allocating them.
func (l *LinearAttention) PlanParams() ([]registry.ParamShape, error) { return planParams(l.prepare) }

// Provision checks every field and allocates zeroed parameters from mem.
func (l *LinearAttention) Provision(mem registry.Memory) (err error) {
	l.c, err = provision(mem, l.prepare)
	return err
}

// prepare checks the fields and builds the prepared layer, its parameters
// made by a in the order Params lists them.
func (l *LinearAttention) prepare(a paramAlloc) (*linearPrepared, error) {
	s, err := l.sizes()
	if err != nil {
		return nil, err
	}
	if !(l.Eps >= 0) || math.IsInf(l.Eps, 0) {
		return nil, fmt.Errorf("eps must be a finite number ≥ 0, got %g", l.Eps)
	}
	if s.rule.delta && !l.QKL2Norm {
		return nil, fmt.Errorf("qk_l2norm: false does not fit update_rule %q: the delta rules need unit keys (‖k‖ = 1 keeps I − βkkᵀ from amplifying the state)", l.UpdateRule)
	}
	c := &linearPrepared{linearSizes: s, l2norm: l.QKL2Norm, eps: l.Eps}
	if s.rule.gated {
		if c.dtBias, err = a.zeros("dt_bias", s.heads); err != nil {
			return nil, err
		}
		if c.aLog, err = a.zeros("A_log", s.heads); err != nil {
			return nil, err
		}
	}
	if c.conv, err = a.zeros("conv1d.weight", s.convDim, 1, s.kernel); err != nil {
		return nil, err
	}
	if c.qkvz, err = newLinearWeights(a, "in_proj_qkvz", s.d, 2*s.keyDim+2*s.valueDim, false); err != nil {
		return nil, err
	}
	if s.gateWidth > 0 {
		c.gateName = map[updateRule]string{
			{gated: true, delta: true}: "in_proj_ba", {delta: true}: "in_proj_b", {gated: true}: "in_proj_a",
		}[s.rule]
		if c.gateProj, err = newLinearWeights(a, c.gateName, s.d, s.gateWidth, false); err != nil {
			return nil, err
		}
	}
	if c.norm, err = a.zeros("norm.weight", s.dv); err != nil {
		return nil, err
	}
	if c.out, err = newLinearWeights(a, "out_proj", s.valueDim, s.d, false); err != nil {
		return nil, err
	}
	return c, nil
}

// Params lists the parameters in Qwen3NextGatedDeltaNet's state_dict
// order: dt_bias and A_log (gated rules), conv1d.weight, in_proj_qkvz,
// in_proj_ba (or in_proj_b, in_proj_a), norm.weight, out_proj. None has a
// bias.
//
// Initialization follows the module's constructor: nn.Linear's and
// nn.Conv1d's kaiming-uniform bounds, dt_bias and the norm weight ones.
// Qwen3-Next draws A from U(0.01, 16) and stores its log; the registry has
// no log-uniform scheme, so A_log draws from U(ln 0.01, ln 16): the same
// range, A log-uniform in it.
func (l *LinearAttention) Params() []registry.Param {
	c := l.c
	if c == nil {
		return nil
	}
	var ps []registry.Param
	if c.rule.gated {
		ps = append(ps,
			registry.Param{Name: "dt_bias", Value: c.dtBias, Init: registry.ConstantInit(1)},
			registry.Param{Name: "A_log", Value: c.aLog, Init: registry.UniformInit(math.Log(0.01), math.Log(16))})
	}
	ps = append(ps, registry.Param{Name: "conv1d.weight", Value: c.conv, Init: registry.LinearInit(c.kernel)})
	ps = append(ps, c.qkvz.params("in_proj_qkvz")...)
	if c.gateProj != nil {
		ps = append(ps, c.gateProj.params(c.gateName)...)
	}
	ps = append(ps, registry.Param{Name: "norm.weight", Value: c.norm, Init: registry.ConstantInit(1)})
	return append(ps, c.out.params("out_proj")...)
}

// Forward runs the recurrence over every token of a (T, d) or (B, T, d)
// input from empty states.
func (l *LinearAttention) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	x, err := readyInput(l.c != nil, inputs)
	if err != nil {
		return nil, err
	}
	if err := x.expectWidth("d", l.c.d); err != nil {
		return nil, err
	}
	return l.c.advance(run, x, &linearState{})
}

// linearState is the registry.State of attention.linear: per sequence,
// the convolution's last kernel−1 inputs and the recurrent states.
type linearState struct {
	session
	// history[b] holds the last kernel−1 rows (conv_dim each) that entered
	// the convolution, oldest first; zeros stand before the first token.
	history [][]float32
	// memory[b] holds the num_heads states, each head_k_dim rows of
	// head_v_dim.
	memory [][]float32
}

var _ registry.State = (*linearState)(nil)

// NewState starts a session with empty states.
func (l *LinearAttention) NewState() registry.State { return &linearState{} }

// Step runs the recurrence over the new tokens, from the session's states.
func (l *LinearAttention) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	x, err := readyInput(l.c != nil, inputs)
	if err != nil {
		return nil, err
	}
	if err := x.expectWidth("d", l.c.d); err != nil {
		return nil, err
	}
	st, err := stateOf[linearState](state, x.B)
	if err != nil {
		return nil, err
	}
	return l.c.advance(run, x, st)
}

// advance computes the output rows of x's tokens, which follow the tokens
// st has seen, and moves st past them. It works on copies of the states
// and commits them only at the end, so that a cancelled pass leaves st as
// it was.
func (c *linearPrepared) advance(run *registry.Run, x seqs, st *linearState) (*tensor.Dense, error) {
	history, memory := c.startStates(st, x.B)
	rows := x.rows()
	mixed := make([]float32, rows*c.convDim)
	z := make([]float32, rows*c.valueDim)
	gates := make([]float32, rows*c.gateWidth)
	c.project(x, mixed, z, gates)
	c.convolve(mixed, history, x.B, x.T)

	o := make([]float32, rows*c.valueDim)
	scratch := make([]float64, 2*c.keyDim+c.dv)
	for b := range x.B {
		if err := run.Err(); err != nil {
			return nil, err
		}
		for t := range x.T {
			r := b*x.T + t
			c.recur(memory[b], mixed[r*c.convDim:(r+1)*c.convDim], gates[r*c.gateWidth:(r+1)*c.gateWidth], o[r*c.valueDim:(r+1)*c.valueDim], scratch)
		}
	}
	c.normGate(o, z, rows)
	out, data := x.newOutput(run, c.d)
	c.out.apply(data, o, rows)
	st.history, st.memory, st.seqs, st.tokens = history, memory, x.B, st.tokens+x.T
	return out, nil
}

// startStates returns copies of a session's states to advance, or zeros
// for a session that has not started.
func (c *linearPrepared) startStates(st *linearState, seqs int) (history, memory [][]float32) {
	history, memory = make([][]float32, seqs), make([][]float32, seqs)
	for b := range seqs {
		if st.seqs == 0 {
			history[b] = make([]float32, (c.kernel-1)*c.convDim)
			memory[b] = make([]float32, c.heads*c.dk*c.dv)
			continue
		}
		history[b], memory[b] = slices.Clone(st.history[b]), slices.Clone(st.memory[b])
	}
	return history, memory
}

// project computes in_proj_qkvz and the gates' projection of every token,
// and sorts the first into the convolution's input, [q of every key head |
// k of every key head | v of every value head] (conv_dim per row), and z.
func (c *linearPrepared) project(x seqs, mixed, z, gates []float32) {
	rows := x.rows()
	width := 2*c.keyDim + 2*c.valueDim
	qkvz := make([]float32, rows*width)
	c.qkvz.apply(qkvz, x.data, rows)
	if c.gateProj != nil {
		c.gateProj.apply(gates, x.data, rows)
	}
	group := 2*c.dk + 2*c.group*c.dv // one key head's [q | k | v… | z…]
	vw := c.group * c.dv
	for r := range rows {
		src, dst := qkvz[r*width:], mixed[r*c.convDim:]
		for g := range c.keyHeads {
			in := src[g*group:]
			copy(dst[g*c.dk:(g+1)*c.dk], in[:c.dk])
			copy(dst[c.keyDim+g*c.dk:c.keyDim+(g+1)*c.dk], in[c.dk:2*c.dk])
			copy(dst[2*c.keyDim+g*vw:2*c.keyDim+(g+1)*vw], in[2*c.dk:2*c.dk+vw])
			copy(z[r*c.valueDim+g*vw:r*c.valueDim+(g+1)*vw], in[2*c.dk+vw:group])
		}
	}
}

// convolve replaces every row of mixed (B sequences of T rows of conv_dim)
// by silu of its causal depthwise convolution, nn.Conv1d(groups=conv_dim)
// over the kernel−1 rows before it and itself, the first of which come
// from history; history then holds the last kernel−1 input rows.
func (c *linearPrepared) convolve(mixed []float32, history [][]float32, seqs, tokens int) {
	k, w, width := c.kernel, floats(c.conv), c.convDim
	window := make([]float32, (k-1+tokens)*width)
	sum := make([]float64, width)
	for b := range seqs {
		copy(window, history[b])
		copy(window[(k-1)*width:], mixed[b*tokens*width:(b+1)*tokens*width])
		for t := range tokens {
			clear(sum)
			for j := range k {
				in := window[(t+j)*width : (t+j+1)*width]
				for ch, v := range in {
					sum[ch] += float64(w[ch*k+j]) * float64(v)
				}
			}
			row := mixed[(b*tokens+t)*width : (b*tokens+t+1)*width]
			for ch, s := range sum {
				row[ch] = float32(silu(s))
			}
		}
		copy(history[b], window[tokens*width:])
	}
}

// recur advances the states of one sequence, memory (num_heads states of
// head_k_dim × head_v_dim), by one token: mixed is the token's convolved
// [q | k | v], gates its b and a projections. It writes the token's read
// of every value head to o. scratch holds 2·key_dim + head_v_dim floats:
// the normalized queries and keys, and a head's write.
func (c *linearPrepared) recur(memory, mixed, gates, o []float32, scratch []float64) {
	q, k, delta := scratch[:c.keyDim], scratch[c.keyDim:2*c.keyDim], scratch[2*c.keyDim:]
	qScale := 1 / math.Sqrt(float64(c.dk))
	for g := range c.keyHeads {
		c.normalize(q[g*c.dk:(g+1)*c.dk], mixed[g*c.dk:], qScale)
		c.normalize(k[g*c.dk:(g+1)*c.dk], mixed[c.keyDim+g*c.dk:], 1)
	}
	for h := range c.heads {
		g := h / c.group
		qh, kh := q[g*c.dk:(g+1)*c.dk], k[g*c.dk:(g+1)*c.dk]
		v := mixed[2*c.keyDim+h*c.dv : 2*c.keyDim+(h+1)*c.dv]
		s := memory[h*c.dk*c.dv : (h+1)*c.dk*c.dv]
		decay, beta := c.gatesOf(gates, h)
		if c.rule.gated {
			for i := range s {
				s[i] = float32(float64(s[i]) * decay)
			}
		}
		for j := range delta {
			delta[j] = float64(v[j])
		}
		if c.rule.delta { // β(v − Sᵀk)
			for j := range delta {
				var read float64
				for i, ki := range kh {
					read += float64(s[i*c.dv+j]) * ki
				}
				delta[j] = beta * (delta[j] - read)
			}
		}
		for i, ki := range kh {
			row := s[i*c.dv : (i+1)*c.dv]
			for j := range row {
				row[j] = float32(float64(row[j]) + ki*delta[j])
			}
		}
		out := o[h*c.dv : (h+1)*c.dv]
		for j := range out {
			var read float64
			for i, qi := range qh {
				read += float64(s[i*c.dv+j]) * qi
			}
			out[j] = float32(read)
		}
	}
}

// normalize writes a head of x (head_k_dim values) to dst, divided by its
// L2 norm if the layer normalizes, and times scale.
func (c *linearPrepared) normalize(dst []float64, x []float32, scale float64) {
	if c.l2norm {
		var ss float64
		for _, v := range x[:len(dst)] {
			ss += float64(v) * float64(v)
		}
		scale /= math.Sqrt(ss + l2NormEps)
	}
	for i := range dst {
		dst[i] = float64(x[i]) * scale
	}
}

// gatesOf returns value head h's decay factor exp(g) and write strength β
// from a token's gate projections (1 where the rule has none).
func (c *linearPrepared) gatesOf(gates []float32, h int) (decay, beta float64) {
	decay, beta = 1, 1
	var b, a float32
	switch {
	case c.rule.gated && c.rule.delta: // per key head: b of its value heads, then a
		g, i := h/c.group, h%c.group
		b, a = gates[g*2*c.group+i], gates[g*2*c.group+c.group+i]
	case c.rule.delta:
		b = gates[h]
	case c.rule.gated:
		a = gates[h]
	}
	if c.rule.delta {
		beta = 1 / (1 + math.Exp(-float64(b)))
	}
	if c.rule.gated {
		a := float64(a) + float64(floats(c.dtBias)[h])
		decay = math.Exp(-math.Exp(float64(floats(c.aLog)[h])) * softplus(a))
	}
	return decay, beta
}

// softplus is log(1 + eˣ) as PyTorch's F.softplus computes it (beta 1,
// threshold 20: x itself above 20).
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// normGate applies the gated RMSNorm to every value head of o (rows of
// value_dim): each head divided by its root mean square, times the norm
// weight and silu of the head's z.
func (c *linearPrepared) normGate(o, z []float32, rows int) {
	w := floats(c.norm)
	for r := range rows * c.heads {
		head, gate := o[r*c.dv:(r+1)*c.dv], z[r*c.dv:(r+1)*c.dv]
		var ss float64
		for _, v := range head {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(c.dv)+c.eps)
		for j, v := range head {
			head[j] = float32(float64(w[j]) * float64(v) * inv * silu(float64(gate[j])))
		}
	}
}

// FLOPs counts the projections (in_proj_qkvz, the gates' projection,
// out_proj) and, per token and value head, the products with the state,
// each 2·head_k_dim·head_v_dim: the read Sᵀq, the write k·δᵀ, and for the
// delta rules the read Sᵀk. The convolution (kernel multiply-adds per
// channel), the decay, normalization and gating are elementwise: not
// counted.
func (l *LinearAttention) FLOPs(inputs []tensor.Shape) (int64, error) {
	s, err := l.sizes()
	if err != nil {
		return 0, err
	}
	x, err := oneFLOPInput(inputs, "d", s.d)
	if err != nil {
		return 0, err
	}
	reads := 2
	if s.rule.delta {
		reads = 3
	}
	var c flopCount
	c.linear(x.rows(), s.d, 2*s.keyDim+2*s.valueDim+s.gateWidth)
	c.product(x.rows(), s.heads, reads, s.dk, s.dv)
	c.linear(x.rows(), s.valueDim, s.d)
	return c.result()
}

// OutputShape is the input's shape.
func (l *LinearAttention) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "d", l.D)
}
