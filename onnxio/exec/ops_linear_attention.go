package exec

import (
	"errors"
	"fmt"
	"math"
)

// LinearAttention (opset 27) is recurrent linear attention over packed
// (batch, T, heads·head_size) inputs, for decoding (T = 1) and prefill
// (T > 1) alike. Each KV head h keeps a d_k × d_v state S, which starts
// from past_state (zeros when absent) and is updated once per token:
//
//	linear:      S = S + k ⊗ v
//	gated:       S = exp(g) ⊙ S + k ⊗ v
//	delta:       S = S + β · k ⊗ (v − Sᵀk)
//	gated_delta: S = exp(g) ⊙ S + β · k ⊗ (v − (exp(g) ⊙ S)ᵀk)
//	output:      o = scale · qᵀS
//
// g is decay (log space), per head (B, T, H_kv) or per key channel
// (B, T, H_kv·d_k), each key row of S then decaying on its own; β is beta,
// per head (B, T, H_kv) or shared (B, T, 1). Decay is required by the gated
// rules and refused by the others, beta likewise for the delta rules.
// Query head h reads the state of KV head ⌊h / (q_num_heads/kv_num_heads)⌋
// (GQA; MQA with one KV head). scale 0 (the default) means 1/√d_k. The
// present_state output is the state after the last token, in past_state's
// element type (the query's without one). chunk_size is a tuning hint of
// chunked algorithms and changes nothing.
//
// The executor runs the recurrence token by token, so a prefill of T tokens
// is exactly T decode steps that carry present_state into past_state. As
// in ONNX's reference implementation, float32 inputs keep the state in
// float32 between tokens; sums over a head dimension are accumulated in
// float64. Inputs of float64 (or a float64 state) run in float64.
func init() {
	ops["LinearAttention"] = &opSpec{since: 27, minIn: 3, maxIn: 6, minOut: 1, maxOut: 2,
		run: linearAttentionOp, check: checkLinearAttention,
		attrs: map[string]attrKind{
			"q_num_heads": attrInt, "kv_num_heads": attrInt, "update_rule": attrString,
			"scale": attrFloat, "chunk_size": attrInt,
		}}
}

// The inputs of LinearAttention, by position.
const (
	linQuery, linKey, linValue, linPastState, linDecay, linBeta = 0, 1, 2, 3, 4, 5
)

// linearRule is what an update rule does: decay the state (gated) and
// write the correction v − Sᵀk instead of v (delta).
type linearRule struct{ gated, delta bool }

// linearRules are the update rules by name.
var linearRules = map[string]linearRule{
	"linear":      {},
	"gated":       {gated: true},
	"delta":       {delta: true},
	"gated_delta": {gated: true, delta: true},
}

// checkLinearAttention checks the attributes of a LinearAttention node and
// that its decay and beta inputs are there exactly when its rule uses them.
func checkLinearAttention(n *node) error {
	if !n.has("q_num_heads") || !n.has("kv_num_heads") {
		return errors.New("needs the attributes q_num_heads and kv_num_heads")
	}
	qHeads, kvHeads := n.attrInt("q_num_heads", 0), n.attrInt("kv_num_heads", 0)
	if qHeads <= 0 || kvHeads <= 0 || qHeads%kvHeads != 0 {
		return fmt.Errorf("q_num_heads (%d) must be a positive multiple of kv_num_heads (%d)", qHeads, kvHeads)
	}
	name := n.attrString("update_rule", "gated_delta")
	rule, ok := linearRules[name]
	if !ok {
		return fmt.Errorf("update_rule %q is not one of linear, gated, delta, gated_delta", name)
	}
	present := func(i int) bool { return i < len(n.inName) && n.inName[i] != "" }
	switch {
	case rule.gated && !present(linDecay):
		return fmt.Errorf("update_rule %q needs the decay input (input %d)", name, linDecay)
	case !rule.gated && present(linDecay):
		return fmt.Errorf("update_rule %q takes no decay input (input %d)", name, linDecay)
	case rule.delta && !present(linBeta):
		return fmt.Errorf("update_rule %q needs the beta input (input %d)", name, linBeta)
	case !rule.delta && present(linBeta):
		return fmt.Errorf("update_rule %q takes no beta input (input %d)", name, linBeta)
	}
	return nil
}

// linearPlan is one LinearAttention call: its sizes and options, checked
// against the inputs.
type linearPlan struct {
	rule                     linearRule
	batch, steps             int // B and T
	qHeads, kvHeads, group   int // group = qHeads / kvHeads
	dk, dv                   int
	scale                    float64
	decayPerKey, betaPerHead bool
	outDType, stateDType     DType
	outShape, stateShape     []int
	query, key, value, past  *value
	decay, beta              *value
}

// linearAttentionOp is the kernel of LinearAttention.
func linearAttentionOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	p, err := planLinearAttention(n, in)
	if err != nil {
		return nil, err
	}
	if p.outDType == Float64 || p.stateDType == Float64 {
		return runLinearAttention[float64](rc, n, p)
	}
	return runLinearAttention[float32](rc, n, p)
}

// planLinearAttention reads the attributes and checks the inputs' element
// types and shapes against each other.
func planLinearAttention(n *node, in []*value) (*linearPlan, error) {
	p := &linearPlan{
		rule:    linearRules[n.attrString("update_rule", "gated_delta")],
		qHeads:  int(n.attrInt("q_num_heads", 0)),
		kvHeads: int(n.attrInt("kv_num_heads", 0)),
		query:   in[linQuery], key: in[linKey], value: in[linValue],
		past: input(in, linPastState), decay: input(in, linDecay), beta: input(in, linBeta),
	}
	p.group = p.qHeads / p.kvHeads
	for _, x := range []struct {
		name string
		v    *value
	}{{"query", p.query}, {"key", p.key}, {"value", p.value}, {"decay", p.decay}, {"beta", p.beta}} {
		switch {
		case x.v == nil:
		case !x.v.dtype.IsFloat():
			return nil, fmt.Errorf("%s is %s; LinearAttention takes float32 or float64", x.name, x.v.describe())
		case x.v.dtype != p.query.dtype:
			return nil, fmt.Errorf("%s is %s, query is %s: they must have the same element type", x.name, x.v.describe(), p.query.describe())
		case x.v.rank() != 3:
			return nil, fmt.Errorf("%s is %s; it must be rank 3 (batch, sequence, heads·size)", x.name, x.v.describe())
		}
	}
	q, v := p.query.shape, p.value.shape
	p.batch, p.steps = q[0], q[1]
	if q[2]%p.qHeads != 0 || v[2]%p.kvHeads != 0 {
		return nil, fmt.Errorf("query is %s and value %s: their last dimensions must be multiples of q_num_heads (%d) and kv_num_heads (%d)",
			p.query.describe(), p.value.describe(), p.qHeads, p.kvHeads)
	}
	p.dk, p.dv = q[2]/p.qHeads, v[2]/p.kvHeads
	for _, x := range []struct {
		name string
		v    *value
	}{{"key", p.key}, {"value", p.value}} {
		last := p.kvHeads * p.dk
		if x.name == "value" {
			last = v[2]
		}
		if !equalShapes(x.v.shape, []int{p.batch, p.steps, last}) {
			return nil, fmt.Errorf("%s is %s, want (%d, %d, %d) for query %s with %d query and %d KV heads",
				x.name, x.v.describe(), p.batch, p.steps, last, shapeString(q), p.qHeads, p.kvHeads)
		}
	}
	var err error
	if p.decayPerKey, err = p.gateLayout("decay", p.decay, p.kvHeads*p.dk, p.kvHeads); err != nil {
		return nil, err
	}
	if p.betaPerHead, err = p.gateLayout("beta", p.beta, p.kvHeads, 1); err != nil {
		return nil, err
	}
	p.outDType, p.stateDType = p.query.dtype, p.query.dtype
	p.stateShape = []int{p.batch, p.kvHeads, p.dk, p.dv}
	if p.past != nil {
		if !p.past.dtype.IsFloat() {
			return nil, fmt.Errorf("past_state is %s; it must be float32 or float64", p.past.describe())
		}
		if !equalShapes(p.past.shape, p.stateShape) {
			return nil, fmt.Errorf("past_state is %s, want %s (batch, kv_num_heads, d_k, d_v)", p.past.describe(), shapeString(p.stateShape))
		}
		p.stateDType = p.past.dtype
	}
	p.outShape = []int{p.batch, p.steps, p.qHeads * p.dv}
	p.scale = float64(n.attrFloat("scale", 0))
	if p.scale == 0 {
		p.scale = 1 / math.Sqrt(float64(p.dk))
	}
	return p, nil
}

// gateLayout checks decay or beta, whose last dimension is fine (one value
// per key channel or per head) or coarse (per head, or one for all heads),
// and reports whether it is fine. When both sizes are equal the two
// layouts address the same elements. An absent gate passes.
func (p *linearPlan) gateLayout(name string, g *value, fine, coarse int) (bool, error) {
	if g == nil {
		return false, nil
	}
	s := g.shape
	if s[0] != p.batch || s[1] != p.steps || (s[2] != fine && s[2] != coarse) {
		return false, fmt.Errorf("%s is %s, want (%d, %d, %d) or (%d, %d, %d)", name, g.describe(), p.batch, p.steps, fine, p.batch, p.steps, coarse)
	}
	return s[2] == fine, nil
}

// linearOperands are the data of one call in the compute type C.
type linearOperands[C float] struct {
	q, k, v, decay, beta, past []C
	out, state                 []C       // (B, T, H_q·d_v) and (B, H_kv, d_k, d_v)
	acc                        []float64 // d_v sums
}

// runLinearAttention computes the outputs in type C.
func runLinearAttention[C float](rc *runCtx, n *node, p *linearPlan) ([]*value, error) {
	var x linearOperands[C]
	var err error
	for _, f := range []struct {
		dst *[]C
		v   *value
	}{{&x.q, p.query}, {&x.k, p.key}, {&x.v, p.value}, {&x.decay, p.decay}, {&x.beta, p.beta}, {&x.past, p.past}} {
		if *f.dst, err = floatData[C](rc, n, f.v); err != nil {
			return nil, err
		}
	}
	out, err := rc.alloc(n, floatDType[C](), p.outShape)
	if err != nil {
		return nil, err
	}
	state, err := rc.alloc(n, floatDType[C](), p.stateShape)
	if err != nil {
		return nil, err
	}
	scratch, err := rc.alloc(n, Float64, []int{p.dv})
	if err != nil {
		return nil, err
	}
	x.out, x.state, x.acc = out.data.([]C), state.data.([]C), scratch.data.([]float64)
	copy(x.state, x.past)
	if err := recurHeads(rc, p, &x); err != nil {
		return nil, err
	}
	y, err := floatValue(rc, n, p.outDType, p.outShape, x.out)
	if err != nil {
		return nil, err
	}
	present, err := floatValue(rc, n, p.stateDType, p.stateShape, x.state)
	if err != nil {
		return nil, err
	}
	return []*value{y, present}, nil
}

// recurHeads runs the recurrence of every (batch, KV head) pair over the
// tokens, checking the run's context once per token. Each step rounds to C
// where ONNX's reference rounds to float32: the decayed state, the
// retrieved Sᵀk, v − Sᵀk, its product with β, and the updated state.
func recurHeads[C float](rc *runCtx, p *linearPlan, x *linearOperands[C]) error {
	dk, dv := p.dk, p.dv
	for b := range p.batch {
		for h := range p.kvHeads {
			s := x.state[(b*p.kvHeads+h)*dk*dv : (b*p.kvHeads+h+1)*dk*dv]
			for t := range p.steps {
				if err := rc.ctx.Err(); err != nil {
					return err
				}
				row := b*p.steps + t // the token's row of the packed inputs
				if p.rule.gated {
					decayState(s, x.decay, p, row, h)
				}
				k := x.k[(row*p.kvHeads+h)*dk : (row*p.kvHeads+h+1)*dk]
				v := x.v[(row*p.kvHeads+h)*dv : (row*p.kvHeads+h+1)*dv]
				w := x.acc // what the state takes in: v, or β(v − Sᵀk)
				if p.rule.delta {
					beta := float64(x.beta[row])
					if p.betaPerHead {
						beta = float64(x.beta[row*p.kvHeads+h])
					}
					readState(w, s, k, dv)
					for m := range w {
						w[m] = float64(C(beta * float64(v[m]-C(w[m]))))
					}
				} else {
					for m := range w {
						w[m] = float64(v[m])
					}
				}
				for i, ki := range k {
					sr := s[i*dv : (i+1)*dv]
					for m, wm := range w {
						sr[m] = C(float64(sr[m]) + float64(ki)*wm)
					}
				}
				for g := range p.group {
					hq := h*p.group + g
					q := x.q[(row*p.qHeads+hq)*dk : (row*p.qHeads+hq+1)*dk]
					o := x.out[(row*p.qHeads+hq)*dv : (row*p.qHeads+hq+1)*dv]
					readState(x.acc, s, q, dv)
					for m, a := range x.acc {
						o[m] = C(p.scale * a)
					}
				}
			}
		}
	}
	return nil
}

// decayState multiplies the state s of KV head h by exp(g) for the token
// of the given row: one factor per key row of the state, or one for all.
func decayState[C float](s, decay []C, p *linearPlan, row, h int) {
	dk, dv := p.dk, p.dv
	for i := range dk {
		g := decay[row*p.kvHeads+h]
		if p.decayPerKey {
			g = decay[(row*p.kvHeads+h)*dk+i]
		}
		f := math.Exp(float64(g))
		sr := s[i*dv : (i+1)*dv]
		for m := range sr {
			sr[m] = C(float64(sr[m]) * f)
		}
	}
}

// readState sets acc[m] = Σ_i x[i]·S[i][m], summed in float64.
func readState[C float](acc []float64, s, x []C, dv int) {
	clear(acc)
	for i, xi := range x {
		sr := s[i*dv : (i+1)*dv]
		for m, sm := range sr {
			acc[m] += float64(xi) * float64(sm)
		}
	}
}
