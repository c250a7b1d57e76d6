package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// MLA is attention.mla, the multi-head latent attention of DeepSeek-V2 and
// V3 as Hugging Face's DeepseekV3Attention writes it. Causal self-attention
// whose keys and values come from one small latent per token:
//
//	q           = q_b_proj(RMSNorm(q_a_proj(x)))   (or q_proj(x) with q_lora_rank 0)
//	c, k_rope   = kv_a_proj_with_mqa(x)            c: kv_lora_rank, k_rope: qk_rope_head_dim
//	c           = RMSNorm(c)                       kv_a_layernorm
//	k_nope, v   = kv_b_proj(c)                     per head: qk_nope_head_dim, v_head_dim
//	q_h         = [q_nope_h | RoPE(q_rope_h)],  k_h = [k_nope_h | RoPE(k_rope)]
//
// k_rope is one key shared by every head (the "with MQA" of the name). Each
// head attends with softmax(scale·q_h·k_hᵀ + causal mask) over v_h, scale
// 1/√(qk_nope_head_dim + qk_rope_head_dim) by default, and o_proj maps the
// heads back to d.
//
// RoPE rotates the qk_rope_head_dim dimensions at positions 0..T−1 with
// base rope_base. DeepSeek's checkpoints lay them out in interleaved pairs
// (rope_interleave: true, the default of DeepseekV3Config; rope:
// interleaved); rope: half is rotate_half's layout (rope_interleave:
// false). Hugging Face writes the interleaved rotation de-interleaved,
// evens then odds, for queries and keys alike, which changes no score. The
// default RoPE only: YaRN scaling (DeepSeek-V3's checkpoints) changes the
// frequencies and multiplies the scale by mscale², and is not supported;
// scale overrides the scale alone.
//
// As a Stepper the layer keeps, per token, only the normalized latent c and
// the rotated k_rope (kv_lora_rank + qk_rope_head_dim values, not the
// num_heads·(qk_nope_head_dim + v_head_dim) of the keys and values), and
// decodes with the weights absorbed: kv_b_proj's key rows fold into the
// queries (q_nope_h·W_UK_h, a query in latent space) and its value rows
// apply to the attention's output, so the steps attend over the latent
// directly, every head sharing it as multi-query attention does. Forward
// computes the keys and values as Hugging Face does; the two orders of the
// same products agree to float32 rounding.
type MLA struct {
	// D is the width of the input and output tokens.
	D int `yaml:"d"`
	// NumHeads is the number of heads.
	NumHeads int `yaml:"num_heads"`
	// QLoRARank is the width of the query latent; 0 projects queries
	// directly with q_proj (DeepSeek-V2-Lite's q_lora_rank: null).
	QLoRARank int `yaml:"q_lora_rank"`
	// KVLoRARank is the width of the key/value latent the cache holds.
	KVLoRARank int `yaml:"kv_lora_rank"`
	// QKNopeHeadDim is the width of a head's query and key without RoPE.
	QKNopeHeadDim int `yaml:"qk_nope_head_dim"`
	// QKRopeHeadDim is the width of a head's rotated query and of the
	// shared rotated key (even).
	QKRopeHeadDim int `yaml:"qk_rope_head_dim"`
	// VHeadDim is the width of a head's value.
	VHeadDim int `yaml:"v_head_dim"`
	// AttentionBias gives q_a_proj (or q_proj), kv_a_proj_with_mqa and
	// o_proj a bias, as DeepseekV3Config's attention_bias.
	AttentionBias bool `yaml:"attention_bias"`
	// RoPE is the layout of the rotated dimensions: "interleaved"
	// (default; DeepSeek's rope_interleave) or "half".
	RoPE string `yaml:"rope"`
	// RoPEBase is the rotary base θ (default 10000, rope_theta).
	RoPEBase float64 `yaml:"rope_base"`
	// Eps is the epsilon of both RMSNorms (default 1e-6, rms_norm_eps).
	Eps float64 `yaml:"eps"`
	// Scale multiplies the scores (default 0 means
	// 1/√(qk_nope_head_dim + qk_rope_head_dim)).
	Scale float64 `yaml:"scale"`

	c *mlaPrepared
}

var (
	_ registry.Provisioner  = (*MLA)(nil)
	_ registry.Stepper      = (*MLA)(nil)
	_ registry.FLOPCounter  = (*MLA)(nil)
	_ registry.OutputShaper = (*MLA)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "attention.mla",
		Summary: "multi-head latent attention (DeepSeek-V2/V3): low-rank queries and keys/values, a shared RoPE key; the KV cache holds the latent",
		New:     func() registry.Layer { return &MLA{RoPE: "interleaved", RoPEBase: 10000, Eps: 1e-6} },
	})
}

// mlaRopeFields are attention.mla's rotary field names.
var mlaRopeFields = rotaryFields{style: "rope", base: "rope_base", dim: "qk_rope_head_dim"}

// mlaPrepared is what Validate prepared; Forward and Step read only this.
type mlaPrepared struct {
	d, heads      int
	qRank, kvRank int
	dn, dr, dv    int
	dqk           int // dn + dr, a query's and key's width per head
	scale         float32
	eps           float64
	// q is q_proj without a query latent; qA and qB the two halves of the
	// low-rank query projection with it.
	q, qA, qB     *linearWeights
	kvA, kvB, o   *linearWeights
	qNorm, kvNorm *tensor.Dense // nil qNorm without a query latent
	rot           *rotary
}

// Validate checks every field (see the type's documentation) and
// allocates zeroed parameters.
func (m *MLA) Validate() error { return m.Provision(nil) }

// PlanParams lists the parameters without allocating them.
func (m *MLA) PlanParams() ([]registry.ParamShape, error) { return planParams(m.prepare) }

// Provision checks every field and allocates zeroed parameters from mem.
func (m *MLA) Provision(mem registry.Memory) (err error) {
	m.c, err = provision(mem, m.prepare)
	return err
}

// prepare checks the fields and builds the prepared layer with a.
func (m *MLA) prepare(a paramAlloc) (*mlaPrepared, error) {
	err := firstError(
		positive("d", m.D),
		positive("num_heads", m.NumHeads),
		nonNegative("q_lora_rank", m.QLoRARank),
		positive("kv_lora_rank", m.KVLoRARank),
		positive("qk_nope_head_dim", m.QKNopeHeadDim),
		positive("qk_rope_head_dim", m.QKRopeHeadDim),
		positive("v_head_dim", m.VHeadDim),
	)
	if err != nil {
		return nil, err
	}
	c := &mlaPrepared{d: m.D, heads: m.NumHeads, qRank: m.QLoRARank, kvRank: m.KVLoRARank,
		dn: m.QKNopeHeadDim, dr: m.QKRopeHeadDim, dv: m.VHeadDim, eps: m.Eps}
	c.dqk = c.dn + c.dr
	if c.heads > maxHeads {
		return nil, fmt.Errorf("num_heads %d is above the limit of %d", c.heads, maxHeads)
	}
	if c.dqk > maxElements/c.heads || c.dn+c.dv > maxElements/c.heads || c.dv > maxElements/c.heads {
		return nil, fmt.Errorf("num_heads %d × the head widths is above the limit of %d", c.heads, maxElements)
	}
	if c.rot, err = newRotary(mlaRopeFields, m.RoPE, m.RoPEBase, c.dr, c.dr); err != nil {
		return nil, err
	}
	if !(m.Eps >= 0) || math.IsInf(m.Eps, 0) {
		return nil, fmt.Errorf("eps must be a finite number ≥ 0, got %g", m.Eps)
	}
	if math.IsNaN(m.Scale) || math.IsInf(m.Scale, 0) {
		return nil, fmt.Errorf("scale must be finite, got %g", m.Scale)
	}
	c.scale = float32(m.Scale)
	if m.Scale == 0 {
		c.scale = invSqrt(c.dqk)
	}
	if err := c.allocate(a, m.AttentionBias); err != nil {
		return nil, err
	}
	return c, nil
}

// nonNegative checks a size field that may be 0 (off).
func nonNegative(field string, v int) error {
	if v < 0 {
		return fmt.Errorf("%s must be 0 or positive, got %d", field, v)
	}
	return nil
}

// allocate makes the projections and the norm weights.
func (c *mlaPrepared) allocate(a paramAlloc, bias bool) error {
	var err error
	if c.qRank == 0 {
		if c.q, err = newLinearWeights(a, "q_proj", c.d, c.heads*c.dqk, false); err != nil {
			return err
		}
	} else {
		if c.qA, err = newLinearWeights(a, "q_a_proj", c.d, c.qRank, bias); err != nil {
			return err
		}
		if c.qNorm, err = a.zeros("q_a_layernorm.weight", c.qRank); err != nil {
			return err
		}
		if c.qB, err = newLinearWeights(a, "q_b_proj", c.qRank, c.heads*c.dqk, false); err != nil {
			return err
		}
	}
	if c.kvA, err = newLinearWeights(a, "kv_a_proj_with_mqa", c.d, c.kvRank+c.dr, bias); err != nil {
		return err
	}
	if c.kvNorm, err = a.zeros("kv_a_layernorm.weight", c.kvRank); err != nil {
		return err
	}
	if c.kvB, err = newLinearWeights(a, "kv_b_proj", c.kvRank, c.heads*(c.dn+c.dv), false); err != nil {
		return err
	}
	c.o, err = newLinearWeights(a, "o_proj", c.heads*c.dv, c.d, bias)
	return err
}

// Params lists the parameters in DeepseekV3Attention's state_dict order:
// q_a_proj, q_a_layernorm, q_b_proj (or q_proj), kv_a_proj_with_mqa,
// kv_a_layernorm, kv_b_proj, o_proj; nn.Linear's initialization and norm
// weights of ones, as the module's constructor makes them.
func (m *MLA) Params() []registry.Param {
	c := m.c
	if c == nil {
		return nil
	}
	var ps []registry.Param
	if c.q != nil {
		ps = c.q.params("q_proj")
	} else {
		ps = c.qA.params("q_a_proj")
		ps = append(ps, registry.Param{Name: "q_a_layernorm.weight", Value: c.qNorm, Init: registry.ConstantInit(1)})
		ps = append(ps, c.qB.params("q_b_proj")...)
	}
	ps = append(ps, c.kvA.params("kv_a_proj_with_mqa")...)
	ps = append(ps, registry.Param{Name: "kv_a_layernorm.weight", Value: c.kvNorm, Init: registry.ConstantInit(1)})
	ps = append(ps, c.kvB.params("kv_b_proj")...)
	return append(ps, c.o.params("o_proj")...)
}

// Forward attends every token of a (T, d) or (B, T, d) input to the
// tokens up to it, expanding the latent into per-head keys and values.
func (m *MLA) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	x, err := readyInput(m.c != nil, inputs)
	if err != nil {
		return nil, err
	}
	if err := x.expectWidth("d", m.c.d); err != nil {
		return nil, err
	}
	c := m.c
	weights, err := newStepWeights(run, x.B, c.heads, x.T, x.T)
	if err != nil {
		return nil, err
	}
	q, latent := c.project(x, 0)
	keys, values := c.expand(latent, x.rows())
	ctx := make([]float32, x.rows()*c.heads*c.dv)
	kw, vw := c.heads*c.dqk, c.heads*c.dv
	a := attention{
		seqs: x.B, tq: x.T, tk: x.T, qHeads: c.heads, kvHeads: c.heads, dk: c.dqk, dv: c.dv,
		q: q, ldq: kw, keys: perSequence(keys, x.B, x.T*kw), values: perSequence(values, x.B, x.T*vw),
		ldk: kw, ldv: vw, out: ctx, ldOut: vw, rule: scoreRule{scale: c.scale, causal: true},
	}
	a.run(weightData(weights))
	out, data := x.newOutput(run, c.d)
	c.o.apply(data, ctx, x.rows())
	observe(run, weights)
	return out, nil
}

// mlaState is the registry.State of attention.mla: per sequence, the
// latent of every token so far, kv_lora_rank normalized values then
// qk_rope_head_dim of the rotated shared key.
type mlaState struct {
	session
	latent [][]float32
}

var _ registry.State = (*mlaState)(nil)

// NewState starts a session with an empty latent cache.
func (m *MLA) NewState() registry.State { return &mlaState{} }

// Step attends the new tokens to every token so far through the cached
// latents, with kv_b_proj absorbed into the queries and the output.
func (m *MLA) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	x, err := readyInput(m.c != nil, inputs)
	if err != nil {
		return nil, err
	}
	c := m.c
	if err := x.expectWidth("d", c.d); err != nil {
		return nil, err
	}
	st, err := stateOf[mlaState](state, x.B)
	if err != nil {
		return nil, err
	}
	past := st.tokens
	weights, err := newStepWeights(run, x.B, c.heads, x.T, past+x.T)
	if err != nil {
		return nil, err
	}
	if err := run.Err(); err != nil {
		return nil, err
	}
	q, latent := c.project(x, past)
	cache := make([][]float32, x.B)
	width := c.kvRank + c.dr
	for b := range cache {
		var old []float32
		if st.seqs != 0 {
			old = st.latent[b]
		}
		cache[b] = append(old[:len(old):len(old)], latent[b*x.T*width:(b+1)*x.T*width]...)
	}
	ctx := c.attendLatent(q, cache, x.B, x.T, past, weightData(weights))
	out, data := x.newOutput(run, c.d)
	c.o.apply(data, ctx, x.rows())
	st.latent, st.seqs, st.tokens = cache, x.B, past+x.T
	observe(run, weights)
	return out, nil
}

// project computes the queries of x's tokens (rows of num_heads heads of
// [q_nope | q_rope]) and their latents (rows of [c | k_rope]), the tokens
// sitting at positions past, past+1, ...; both RoPE parts are rotated and
// c is normalized.
func (c *mlaPrepared) project(x seqs, past int) (q, latent []float32) {
	rows, qw := x.rows(), c.heads*c.dqk
	q = make([]float32, rows*qw)
	if c.q != nil {
		c.q.apply(q, x.data, rows)
	} else {
		qa := make([]float32, rows*c.qRank)
		c.qA.apply(qa, x.data, rows)
		rmsRows(qa, c.qRank, c.qRank, rows, floats(c.qNorm), c.eps)
		c.qB.apply(q, qa, rows)
	}
	for h := range c.heads {
		c.rot.apply(q[h*c.dqk+c.dn:], qw, x.B, x.T, 1, past)
	}
	width := c.kvRank + c.dr
	latent = make([]float32, rows*width)
	c.kvA.apply(latent, x.data, rows)
	rmsRows(latent, width, c.kvRank, rows, floats(c.kvNorm), c.eps)
	c.rot.apply(latent[c.kvRank:], width, x.B, x.T, 1, past)
	return q, latent
}

// expand makes the per-head keys (rows of num_heads × [k_nope | k_rope])
// and values (rows of num_heads × v_head_dim) from the latents, as
// Hugging Face's expand_kv does: kv_b_proj on c, k_rope repeated.
func (c *mlaPrepared) expand(latent []float32, rows int) (keys, values []float32) {
	width, kvw := c.kvRank+c.dr, c.heads*(c.dn+c.dv)
	kv := make([]float32, rows*kvw)
	kernels.Gemm(false, true, rows, kvw, c.kvRank, 1, latent, width, c.kvB.w, c.kvRank, 0, kv, kvw)
	keys = make([]float32, rows*c.heads*c.dqk)
	values = make([]float32, rows*c.heads*c.dv)
	for r := range rows {
		rope := latent[r*width+c.kvRank : (r+1)*width]
		for h := range c.heads {
			src := kv[r*kvw+h*(c.dn+c.dv):]
			key := keys[(r*c.heads+h)*c.dqk:]
			copy(key[:c.dn], src[:c.dn])
			copy(key[c.dn:c.dqk], rope)
			copy(values[(r*c.heads+h)*c.dv:(r*c.heads+h+1)*c.dv], src[c.dn:c.dn+c.dv])
		}
	}
	return keys, values
}

// attendLatent is attention with kv_b_proj absorbed: the queries of T new
// tokens per sequence (at positions past...) become latent queries
// [q_nope_h·W_UK_h | q_rope_h], attend causally over cache[b] (the latents
// of the past+T tokens of sequence b, shared by every head) with the
// latents' c as values, and each head's result times W_UV_hᵀ is its
// context. It returns the context rows (num_heads × v_head_dim) and writes
// the weights, if weights is non-nil.
func (c *mlaPrepared) attendLatent(q []float32, cache [][]float32, seqs, tokens, past int, weights []float32) []float32 {
	rows, width, qw := seqs*tokens, c.kvRank+c.dr, c.heads*c.dqk
	kvRows, lw := c.kvB.w, c.heads*width
	headRows := (c.dn + c.dv) * c.kvRank // kv_b_proj's rows of one head, flattened
	ql := make([]float32, rows*lw)
	for h := range c.heads {
		// q_nope_h (rows × dn) times W_UK_h (dn × kv_lora_rank).
		kernels.Gemm(false, false, rows, c.kvRank, c.dn, 1, q[h*c.dqk:], qw, kvRows[h*headRows:], c.kvRank, 0, ql[h*width:], lw)
		for r := range rows {
			copy(ql[r*lw+h*width+c.kvRank:r*lw+(h+1)*width], q[r*qw+h*c.dqk+c.dn:r*qw+(h+1)*c.dqk])
		}
	}
	cw := c.heads * c.kvRank
	ctxLatent := make([]float32, rows*cw)
	a := attention{
		seqs: seqs, tq: tokens, tk: past + tokens, qHeads: c.heads, kvHeads: 1, dk: width, dv: c.kvRank,
		q: ql, ldq: lw, keys: cache, values: cache, ldk: width, ldv: width, out: ctxLatent, ldOut: cw,
		rule: scoreRule{scale: c.scale, causal: true, qPos: past},
	}
	a.run(weights)
	vw := c.heads * c.dv
	ctx := make([]float32, rows*vw)
	for h := range c.heads {
		// The head's latent context (rows × kv_lora_rank) times W_UV_hᵀ.
		kernels.Gemm(false, true, rows, c.dv, c.kvRank, 1, ctxLatent[h*c.kvRank:], cw, kvRows[h*headRows+c.dn*c.kvRank:], c.kvRank, 0, ctx[h*c.dv:], vw)
	}
	return ctx
}

// FLOPs counts Forward's products: the query projections (q_a_proj and
// q_b_proj, or q_proj), kv_a_proj_with_mqa, kv_b_proj on every token, the
// attention products of num_heads heads (keys of qk_nope_head_dim +
// qk_rope_head_dim, values of v_head_dim) and o_proj. RoPE, the norms and
// the mask are elementwise: not counted. (A step's absorbed path does
// other products: per new token, the latent queries and outputs, and
// attention over kv_lora_rank + qk_rope_head_dim wide latents.)
func (m *MLA) FLOPs(inputs []tensor.Shape) (int64, error) {
	x, err := oneFLOPInput(inputs, "d", m.D)
	if err != nil {
		return 0, err
	}
	h, dqk := m.NumHeads, m.QKNopeHeadDim+m.QKRopeHeadDim
	var c flopCount
	if m.QLoRARank > 0 {
		c.linear(x.rows(), m.D, m.QLoRARank)
		c.linear(x.rows(), m.QLoRARank, h*dqk)
	} else {
		c.linear(x.rows(), m.D, h*dqk)
	}
	c.linear(x.rows(), m.D, m.KVLoRARank+m.QKRopeHeadDim)
	c.linear(x.rows(), m.KVLoRARank, h*(m.QKNopeHeadDim+m.VHeadDim))
	c.attention(x.B, h, x.T, x.T, dqk, m.VHeadDim)
	c.linear(x.rows(), h*m.VHeadDim, m.D)
	return c.result()
}

// OutputShape is the input's shape.
func (m *MLA) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "d", m.D)
}
