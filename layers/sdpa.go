package layers

import (
	"errors"
	"fmt"
	"math"

	"github.com/attnrun/attnrun/internal/attn"
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// SDPA is attention.sdpa, general multi-head scaled dot-product attention
// with its projections: q_proj, k_proj and v_proj (nn.Linear), attention
// per head, and out_proj. It is the attention of PyTorch's
// F.scaled_dot_product_attention between Hugging Face-style projections:
// with rope it is Llama/Mistral's attention (LlamaAttention, with
// num_kv_heads for grouped-query attention and window for Mistral's sliding
// window), with softcap Gemma 2's, with alibi BLOOM/MPT's, with qk_norm
// Qwen3's (Qwen3Attention) and with qk_norm: rms_projection OLMo-2's
// (Olmo2Attention), with sinks gpt-oss's (GptOssAttention).
//
// Inputs: [x] is self-attention, [x, memory] cross-attention (queries from
// x, keys and values from memory, which may be wider: d_memory); with a
// mask configured, the mask is one more input, last. Inputs are (T, d) or
// (B, T, d); the output has the shape of x.
//
// Per head, the scores of query i and key j are
//
//	s = scale · q_i·k_j                         scale defaults to 1/√head_dim
//	s = softcap · tanh(s / softcap)             if softcap > 0 (before any mask)
//	s = score_mod(s, b, h, i, j)                each of score_mod, in order
//	s = s + alibi + mask                        −Inf where causal or window hides j
//
// and the output is dropout(softmax(s)) · V, where with sinks the softmax
// has one more score per row, the head's learned sink logit, whose weight
// is then dropped (so a row's weights sum to less than one). Query head h
// uses KV head
// ⌊h / (num_heads/num_kv_heads)⌋ (grouped-query attention; num_kv_heads 1
// is multi-query attention). A key that causal, window or a bool mask
// hides has its score replaced by −Inf, whatever it was (a NaN key there
// does not reach the query); a float mask is added (README, "NaN and
// infinities").
//
// Causal alignment: with Tq queries and Tk keys, "bottom_right" (default,
// PyTorch's causal_lower_right, Hugging Face's and FlashAttention's) lets
// query i see keys j ≤ i + Tk − Tq, so the last query sees every key;
// "top_left" (PyTorch 2.x's is_causal and the ONNX Attention op) lets it
// see j ≤ i. They agree when Tq = Tk. window (sliding-window attention, as
// Mistral's sliding_window) lets a query see at most window keys, itself
// included: j > i − window, in the same alignment. Without causal the
// window is centred on the query (an encoder's local attention, as
// ModernBERT's local_attention): it sees the (window − 1)/2 keys on either
// side, |j − i| ≤ (window − 1)/2, and window is odd.
//
// Masks: mask: bool reads the mask input as 0/1 with an explicit
// mask_polarity ("keep": nonzero attends, as PyTorch SDPA, ONNX and Hugging
// Face; "mask": nonzero is masked out, as nn.MultiheadAttention); mask:
// additive adds it to the scores. The mask broadcasts to (B, H, Tq, Tk)
// from the right: (Tq, Tk), (B, 1, 1, Tk) as a key-padding mask, etc.
//
// A query that sees no key gets weights of 0, so a zero output unless a
// value is NaN or infinite (masked_rows: zeros, FlashAttention's and the
// ONNX op's choice); masked_rows: nan gives NaN,
// as nn.MultiheadAttention and a plain softmax do.
//
// rope applies rotary embeddings to queries and keys after the projection
// (see RoPE; positions 0..T−1, self-attention only). alibi adds ALiBi's
// per-head bias m_h·(j − i) (see ALiBi; self-attention only). qk_norm: rms
// normalizes each head of the queries and keys (RMSNorm over head_dim,
// with the weights q_norm.weight and k_norm.weight) after the projection,
// before RoPE; qk_norm: rms_projection normalizes the whole query and key
// projections instead, before they are split into heads (RMSNorm over
// num_heads·head_dim and num_kv_heads·head_dim).
//
// score_mod lists score modifications (see ScoreMod and
// RegisterScoreMod): {type: softcap, cap: 30}, {type: alibi},
// {type: relative_bias, max_distance: 64}, {type: document_mask,
// lengths: [...]}, or any type registered from outside, alone or in a
// list. They see the index of each query and key within its sequence
// (q_idx and kv_idx of PyTorch's flex_attention), whatever the causal
// alignment. A key a score_mod hides (−Inf whatever the score) is hidden as
// causal hides it.
//
// As a Stepper, a causal self-attention layer keeps a KV cache (keys after
// RoPE); with window it keeps only the last window−1 keys. A cross-attention
// layer caches its memory's projections and re-projects only when the
// memory changes.
type SDPA struct {
	// D is the width of x and of the output.
	D int `yaml:"d"`
	// DMemory is the width of the memory input of cross-attention (default d).
	DMemory int `yaml:"d_memory"`
	// NumHeads is the number of query heads.
	NumHeads int `yaml:"num_heads"`
	// NumKVHeads is the number of key/value heads (default num_heads); it
	// must divide num_heads.
	NumKVHeads int `yaml:"num_kv_heads"`
	// HeadDim is the width of one head (default d / num_heads).
	HeadDim int `yaml:"head_dim"`
	// QKVBias gives q_proj, k_proj and v_proj a bias.
	QKVBias bool `yaml:"qkv_bias"`
	// OutBias gives the output projection a bias (default true).
	OutBias bool `yaml:"out_bias"`
	// OutName names the output projection's parameters: "out_proj"
	// (default, PyTorch) or "o_proj" (Hugging Face Llama, Mistral, Gemma).
	OutName string `yaml:"out_name"`
	// Causal hides keys after each query (see the alignment above).
	Causal bool `yaml:"causal"`
	// CausalAlign is "bottom_right" (default) or "top_left".
	CausalAlign string `yaml:"causal_align"`
	// Scale multiplies q·k (default 0 means 1/√head_dim).
	Scale float64 `yaml:"scale"`
	// Softcap, if positive, caps the scores to (−softcap, softcap) with
	// softcap·tanh(s/softcap), before the masks.
	Softcap float64 `yaml:"softcap"`
	// Window, if positive, is how many keys a query sees, itself included
	// (sliding-window attention): the last ones with causal, an odd number
	// centred on the query without.
	Window int `yaml:"window"`
	// Dropout is the probability of zeroing an attention weight in train mode.
	Dropout float64 `yaml:"dropout"`
	// Mask is the kind of the mask input: "" (none), "bool" or "additive".
	Mask string `yaml:"mask"`
	// MaskPolarity says what a nonzero bool mask value means: "keep"
	// (attend) or "mask" (masked out). Required with mask: bool.
	MaskPolarity string `yaml:"mask_polarity"`
	// MaskedRows is the output of a query that sees no key: "zeros"
	// (default: weights of 0) or "nan".
	MaskedRows string `yaml:"masked_rows"`
	// RoPE is the rotary embedding style: "" (none), "half" (GPT-NeoX,
	// Llama) or "interleaved" (GPT-J).
	RoPE string `yaml:"rope"`
	// RoPEBase is the rotary base θ (default 10000).
	RoPEBase float64 `yaml:"rope_base"`
	// RoPERotaryDim is how many leading dimensions of each head rotate
	// (default 0: all; partial rotary otherwise).
	RoPERotaryDim int `yaml:"rope_rotary_dim"`
	// ALiBi adds the ALiBi bias of num_heads slopes to the scores.
	ALiBi bool `yaml:"alibi"`
	// QKNorm normalizes the queries and keys after the projections,
	// before RoPE: "" (none), "rms" (each head: RMSNorm over head_dim with
	// learned weights, Qwen3's q_norm and k_norm) or "rms_projection" (the
	// whole projection: RMSNorm over num_heads·head_dim for the queries and
	// num_kv_heads·head_dim for the keys, OLMo-2's).
	QKNorm string `yaml:"qk_norm"`
	// QKNormEps is the RMSNorm's epsilon (default 1e-6, Qwen3's
	// rms_norm_eps).
	QKNormEps float64 `yaml:"qk_norm_eps"`
	// Sinks gives each query head a learned sink logit (the parameter
	// sinks, gpt-oss's attention sinks): one more score in every softmax,
	// whose weight is dropped. A query that sees no key gives it all its
	// weight, so masked_rows must be zeros.
	Sinks bool `yaml:"sinks"`
	// ScoreMod lists the score modifications, applied in order after
	// softcap and before the masks.
	ScoreMod ScoreMods `yaml:"score_mod,omitempty"`

	c             *sdpaPrepared
	packedWeights `yaml:"-"` // the packed copies of the weights (packs.go), ParamsChanged
}

func init() {
	registry.Register(registry.Info{
		ID:      "attention.sdpa",
		Summary: "scaled dot-product attention with q/k/v/out projections: masks, causal alignment, GQA, RoPE, ALiBi, window, softcap, QK norm, sinks, score_mod",
		New: func() registry.Layer {
			return &SDPA{OutBias: true, OutName: "out_proj", CausalAlign: "bottom_right", MaskedRows: "zeros", RoPEBase: 10000, QKNormEps: 1e-6}
		},
	})
}

// sdpaPrepared is what Validate prepared; Forward and Step read only this.
type sdpaPrepared struct {
	q, k, v, out     *linearWeights
	outName          string
	heads, kvHeads   int
	headDim          int
	causal, topLeft  bool
	scale, softcap   float32
	window           int
	dropout          float64
	mask             attn.MaskKind // 0: no mask input
	nanRows          bool
	rot              *rotary
	slopes           []float32
	d, dMemory, hdim int // d, d_memory and heads·head_dim
	// qNorm and kNorm are the weights of qk_norm (nil without it);
	// qkWhole says they normalize whole projections rather than heads.
	qNorm, kNorm *tensor.Dense
	qkEps        float64
	qkWhole      bool
	sinks        *tensor.Dense // (heads), nil without sinks
	mods         ScoreMods
}

var (
	_ registry.Provisioner  = (*SDPA)(nil)
	_ registry.Stepper      = (*SDPA)(nil)
	_ registry.OutputShaper = (*SDPA)(nil)
	_ registry.FLOPCounter  = (*SDPA)(nil)
)

// sdpaRopeFields are attention.sdpa's rotary field names.
var sdpaRopeFields = rotaryFields{style: "rope", base: "rope_base", dim: "rope_rotary_dim"}

// Validate checks every field (see the type's documentation for the rules)
// and allocates zeroed parameters.
func (s *SDPA) Validate() error { return s.Provision(nil) }

// PlanParams lists the four projections' parameters without allocating
// them.
func (s *SDPA) PlanParams() ([]registry.ParamShape, error) { return planParams(s.prepare) }

// Provision checks every field and allocates zeroed parameters from mem.
func (s *SDPA) Provision(mem registry.Memory) (err error) {
	s.c, s.packs, err = provisionPacked(mem, s.prepare)
	return err
}

// prepare validates the fields in order and builds the prepared layer.
func (s *SDPA) prepare(a paramAlloc) (*sdpaPrepared, error) {
	err := firstError(
		positive("d", s.D),
		positive("num_heads", s.NumHeads),
		probability("dropout", s.Dropout),
	)
	if err != nil {
		return nil, err
	}
	c := &sdpaPrepared{d: s.D, dMemory: s.DMemory, heads: s.NumHeads, kvHeads: s.NumKVHeads, headDim: s.HeadDim, dropout: s.Dropout}
	if c.heads > maxHeads {
		return nil, fmt.Errorf("num_heads %d is above the limit of %d", c.heads, maxHeads)
	}
	if c.dMemory == 0 {
		c.dMemory = s.D
	}
	if c.kvHeads == 0 {
		c.kvHeads = c.heads
	}
	switch {
	case c.dMemory < 0:
		return nil, fmt.Errorf("d_memory must be positive, got %d", c.dMemory)
	case c.kvHeads < 0 || c.heads%c.kvHeads != 0:
		return nil, fmt.Errorf("num_kv_heads %d does not divide num_heads %d", c.kvHeads, c.heads)
	case c.headDim < 0:
		return nil, fmt.Errorf("head_dim must be positive, got %d", c.headDim)
	case c.headDim == 0 && s.D%c.heads != 0:
		return nil, fmt.Errorf("num_heads %d does not divide d %d (or set head_dim)", c.heads, s.D)
	}
	if c.headDim == 0 {
		c.headDim = s.D / c.heads
	}
	if c.headDim > maxElements/c.heads {
		return nil, fmt.Errorf("num_heads %d × head_dim %d is above the limit of %d", c.heads, c.headDim, maxElements)
	}
	c.hdim = c.heads * c.headDim
	if err := s.prepareScores(c); err != nil {
		return nil, err
	}
	if err := s.prepareWeights(a, c); err != nil {
		return nil, err
	}
	return c, nil
}

// prepareScores validates the fields that shape the scores: alignment,
// scale, softcap, window, mask, masked rows, RoPE and ALiBi.
func (s *SDPA) prepareScores(c *sdpaPrepared) error {
	c.causal = s.Causal
	switch s.CausalAlign {
	case "bottom_right":
	case "top_left":
		c.topLeft = true
	default:
		return fmt.Errorf("causal_align %q is not \"bottom_right\" or \"top_left\"", s.CausalAlign)
	}
	if math.IsNaN(s.Scale) || math.IsInf(s.Scale, 0) {
		return fmt.Errorf("scale must be finite, got %g", s.Scale)
	}
	c.scale = float32(s.Scale)
	if s.Scale == 0 {
		c.scale = invSqrt(c.headDim)
	}
	if !(s.Softcap >= 0) || math.IsInf(s.Softcap, 0) {
		return fmt.Errorf("softcap must be 0 (off) or a positive number, got %g", s.Softcap)
	}
	c.softcap = float32(s.Softcap)
	if s.Window < 0 {
		return fmt.Errorf("window must be 0 (off) or positive, got %d", s.Window)
	}
	if s.Window > 0 && !s.Causal && s.Window%2 == 0 {
		return fmt.Errorf("window %d is even; without causal a window is centred on the query, (window − 1)/2 keys on either side, so it is odd", s.Window)
	}
	c.window = s.Window
	switch s.Mask {
	case "":
		if s.MaskPolarity != "" {
			return errors.New("mask_polarity is set but mask is not \"bool\"")
		}
	case "bool":
		kind, err := boolMaskKind("mask_polarity", s.MaskPolarity)
		if err != nil {
			return err
		}
		c.mask = kind
	case "additive":
		if s.MaskPolarity != "" {
			return errors.New("mask_polarity is set but mask is not \"bool\"")
		}
		c.mask = attn.MaskAdd
	default:
		return fmt.Errorf("mask %q is not \"\" (none), \"bool\" or \"additive\"", s.Mask)
	}
	switch s.MaskedRows {
	case "zeros":
	case "nan":
		c.nanRows = true
	default:
		return fmt.Errorf("masked_rows %q is not \"zeros\" or \"nan\"", s.MaskedRows)
	}
	if s.RoPE != "" {
		rot, err := newRotary(sdpaRopeFields, s.RoPE, s.RoPEBase, s.RoPERotaryDim, c.headDim)
		if err != nil {
			return err
		}
		c.rot = rot
	} else if s.RoPERotaryDim != 0 {
		return errors.New("rope_rotary_dim is set but rope is not")
	}
	if s.ALiBi {
		c.slopes = alibiSlopes(c.heads)
	}
	return s.prepareExtras(c)
}

// prepareExtras validates qk_norm and sinks; prepareWeights allocates
// their parameters.
func (s *SDPA) prepareExtras(c *sdpaPrepared) error {
	switch s.QKNorm {
	case "":
	case "rms", "rms_projection":
		if !(s.QKNormEps >= 0) || math.IsInf(s.QKNormEps, 0) {
			return fmt.Errorf("qk_norm_eps must be a finite number ≥ 0, got %g", s.QKNormEps)
		}
		c.qkEps, c.qkWhole = s.QKNormEps, s.QKNorm == "rms_projection"
	default:
		return fmt.Errorf("qk_norm %q is not \"\" (none), \"rms\" (per head) or \"rms_projection\"", s.QKNorm)
	}
	if s.Sinks && c.nanRows {
		return errors.New("masked_rows: nan does not apply with sinks: a query that sees no key gives the sink all its weight (weights of 0)")
	}
	return nil
}

// prepareWeights checks out_name and allocates the parameters in the order
// Params lists them: sinks, the four projections, the qk_norm weights,
// then the score modifications' (prepared here, since preparing them
// allocates: planning lists those that plan theirs, ScoreModPlanner).
func (s *SDPA) prepareWeights(a paramAlloc, c *sdpaPrepared) error {
	switch s.OutName {
	case "out_proj", "o_proj":
		c.outName = s.OutName
	default:
		return fmt.Errorf("out_name %q is not \"out_proj\" (PyTorch) or \"o_proj\" (Hugging Face)", s.OutName)
	}
	kvWidth := c.kvHeads * c.headDim
	var err error
	if s.Sinks {
		if c.sinks, err = a.zeros("sinks", c.heads); err != nil {
			return err
		}
	}
	if c.q, err = newLinearWeights(a, "q_proj", c.d, c.hdim, s.QKVBias); err != nil {
		return err
	}
	if c.k, err = newLinearWeights(a, "k_proj", c.dMemory, kvWidth, s.QKVBias); err != nil {
		return err
	}
	if c.v, err = newLinearWeights(a, "v_proj", c.dMemory, kvWidth, s.QKVBias); err != nil {
		return err
	}
	if c.out, err = newLinearWeights(a, c.outName, c.hdim, c.d, s.OutBias); err != nil {
		return err
	}
	if s.QKNorm != "" {
		qWidth, kWidth := c.headDim, c.headDim
		if c.qkWhole {
			qWidth, kWidth = c.hdim, kvWidth
		}
		if c.qNorm, err = a.zeros("q_norm.weight", qWidth); err != nil {
			return err
		}
		if c.kNorm, err = a.zeros("k_norm.weight", kWidth); err != nil {
			return err
		}
	}
	shape := ScoreModShape{Heads: c.heads, HeadDim: c.headDim}
	if a.planning() {
		return s.ScoreMod.plan(a, shape)
	}
	c.mods = s.ScoreMod
	return c.mods.prepare(shape)
}

// Params lists, in state_dict order, sinks (N(0, 0.02²), as gpt-oss
// initializes them) with sinks; q_proj, k_proj, v_proj and out_proj (or
// o_proj), each nn.Linear's weight then bias, as Hugging Face's attention
// modules register them; q_norm.weight and k_norm.weight (ones) with
// qk_norm, as Qwen3Attention; then the score modifications' parameters.
func (s *SDPA) Params() []registry.Param {
	c := s.c
	if c == nil {
		return nil
	}
	var ps []registry.Param
	if c.sinks != nil { // a module's own parameters come before its submodules'
		ps = append(ps, registry.Param{Name: "sinks", Value: c.sinks, Init: registry.NormalInit(0, 0.02)})
	}
	ps = append(ps, c.q.params("q_proj")...)
	ps = append(ps, c.k.params("k_proj")...)
	ps = append(ps, c.v.params("v_proj")...)
	ps = append(ps, c.out.params(c.outName)...)
	if c.qNorm != nil {
		ps = append(ps,
			registry.Param{Name: "q_norm.weight", Value: c.qNorm, Init: registry.ConstantInit(1)},
			registry.Param{Name: "k_norm.weight", Value: c.kNorm, Init: registry.ConstantInit(1)})
	}
	return append(ps, c.mods.params()...)
}

// Forward computes the attention of x over itself or over memory.
func (s *SDPA) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if s.c == nil {
		return nil, errNotValidated
	}
	in, err := s.c.split(inputs)
	if err != nil {
		return nil, err
	}
	return s.c.attend(run, in, nil)
}

// NewState starts a decoding session with an empty KV cache.
func (s *SDPA) NewState() registry.State { return &attentionState{} }

// Step attends the new tokens of x to every token so far (self-attention,
// which must be causal or masked) or to the memory (cross-attention).
func (s *SDPA) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if s.c == nil {
		return nil, errNotValidated
	}
	in, err := s.c.split(inputs)
	if err != nil {
		return nil, err
	}
	st, err := stateOf[attentionState](state, in.x.B)
	if err != nil {
		return nil, err
	}
	return s.c.attend(run, in, st)
}

// sdpaInputs is a forward pass's inputs, sorted out.
type sdpaInputs struct {
	x      seqs
	memory *seqs         // nil for self-attention
	mask   *tensor.Dense // nil without a mask input
}

// sdpaSorted is an attention.sdpa layer's inputs in their roles: tensors
// for a forward pass, value names for an export, shapes for OutputShape.
// memory is the keys' and values' tokens: the memory of cross-attention,
// or x itself; a mask not configured is the zero T.
type sdpaSorted[T any] struct {
	x, memory, mask T
	cross           bool
}

// sortSDPAInputs sorts [x] or [x, memory], then the mask if one is
// configured.
func sortSDPAInputs[T any](inputs []T, mask bool) (sdpaSorted[T], error) {
	var s sdpaSorted[T]
	n := len(inputs)
	if mask {
		n--
	}
	if n < 1 || n > 2 {
		want := "[x] or [x, memory]"
		if mask {
			want = "[x, mask] or [x, memory, mask]"
		}
		return s, fmt.Errorf("takes %s, got %d input(s)", want, len(inputs))
	}
	s.x, s.memory, s.cross = inputs[0], inputs[n-1], n == 2
	if mask {
		s.mask = inputs[n]
	}
	return s, nil
}

// checkMemory checks the memory of cross-attention against x: width
// dMemory, and x's batch.
func checkMemory(x, m seqs, dMemory int) error {
	if m.D != dMemory {
		return fmt.Errorf("d_memory mismatch: memory last dim %d, layer expects d_memory %d", m.D, dMemory)
	}
	if m.B != x.B || m.batched != x.batched {
		return fmt.Errorf("memory shape %s does not match x %s: want the same batch", fmtShape(m.shape(m.D)), fmtShape(x.shape(x.D)))
	}
	return nil
}

// split sorts the inputs into x, an optional memory and the mask (last,
// if configured), and checks their widths and batch sizes.
func (c *sdpaPrepared) split(inputs []*tensor.Dense) (sdpaInputs, error) {
	var in sdpaInputs
	sorted, err := sortSDPAInputs(inputs, c.mask != 0)
	if err != nil {
		return in, err
	}
	in.mask = sorted.mask
	if in.x, err = readSeqs(sorted.x); err != nil {
		return in, err
	}
	if err := in.x.expectWidth("d", c.d); err != nil {
		return in, err
	}
	if sorted.cross {
		m, err := readSeqs(sorted.memory)
		if err != nil {
			return in, fmt.Errorf("memory: %w", err)
		}
		if err := checkMemory(in.x, m, c.dMemory); err != nil {
			return in, err
		}
		if c.rot != nil || c.slopes != nil {
			return in, errors.New("rope and alibi apply to self-attention; this layer got a memory input")
		}
		in.memory = &m
	}
	return in, nil
}

// attend runs one pass: the whole sequence when st is nil, or the next
// tokens of a decoding session.
func (c *sdpaPrepared) attend(run *registry.Run, in sdpaInputs, st *attentionState) (*tensor.Dense, error) {
	x := in.x
	p, rng, err := activeDropout(run, "dropout", c.dropout)
	if err != nil {
		return nil, err
	}
	past := 0
	if st != nil {
		if err := c.canStep(in); err != nil {
			return nil, err
		}
		past = st.tokens
	}
	kvWidth := c.kvHeads * c.headDim
	kvRows := x.rows() // the tokens whose keys and values this pass projects
	if in.memory != nil {
		kvRows = in.memory.rows()
	}
	sc := getScratch(2*x.rows()*c.hdim + 2*kvRows*kvWidth) // queries, context vectors, keys and values
	defer sc.release()
	q := sc.floats(x.rows() * c.hdim)
	c.q.apply(q, x.data, x.rows())
	if c.qNorm != nil {
		c.normalize(q, x.rows(), c.heads, c.qNorm)
	}
	if c.rot != nil {
		c.rot.apply(q, c.hdim, x.B, x.T, c.heads, past)
	}

	rule := scoreRule{scale: c.scale, softcap: c.softcap, causal: c.causal, window: c.window,
		slopes: c.slopes, nanRows: c.nanRows, dropout: p, rng: rng, mods: c.mods.mods(), qIndex: past}
	if c.sinks != nil {
		rule.sinks = floats(c.sinks)
	}
	src := c.keySource(in, st, past, sc)
	rule.qPos, rule.kPos = src.qPos, src.kPos
	tk := src.tk
	if c.mask != 0 {
		m, err := broadcastMask("mask", in.mask, c.mask, x.B, c.heads, x.T, rule.kPos+tk)
		if err != nil {
			return nil, err
		}
		rule.masks = sc.maskList(1)
		rule.masks[0] = m
	}
	weights, err := newStepWeights(run, x.B, c.heads, x.T, rule.kPos+tk)
	if err != nil {
		return nil, err
	}

	// Everything is checked: from here on the state changes.
	keys, values := src.keys, src.values
	if src.step != nil {
		keys, values = src.step.commit()
		*src.step = pendingStep{} // keep no pass's buffers
	}
	context := sc.floats(x.rows() * c.hdim)
	a := sc.attention()
	*a = attention{
		seqs: x.B, tq: x.T, tk: tk, qHeads: c.heads, kvHeads: c.kvHeads, dk: c.headDim, dv: c.headDim,
		q: q, ldq: c.hdim, keys: keys, values: values, ldk: kvWidth, ldv: kvWidth,
		out: context, ldOut: c.hdim, rule: rule,
	}
	a.run(weightData(weights))
	out, data := x.newOutput(run, c.d)
	c.out.apply(data, context, x.rows())
	if st != nil {
		st.seqs, st.tokens = x.B, st.tokens+x.T
		if c.window > 0 && c.causal && in.memory == nil && !st.keepAll {
			st.caches[0].keepLast(c.window - 1)
		}
	}
	observe(run, weights)
	return out, nil
}

// canStep reports why a step on in would not give the rows of the full
// pass, if it would not.
func (c *sdpaPrepared) canStep(in sdpaInputs) error {
	if c.window > 0 && !c.causal {
		return errors.New("a window centred on the query sees later tokens: it cannot run incrementally")
	}
	if in.memory == nil && !c.causal && c.mask == 0 {
		return errors.New("non-causal self-attention cannot run incrementally (its outputs depend on later tokens): set causal: true, or give a mask")
	}
	if in.memory != nil && c.causal && !c.topLeft {
		return errors.New("a causal cross-attention step needs causal_align: top_left (bottom-right alignment depends on the final number of queries)")
	}
	return nil
}

// keySource is where a pass's keys and values come from, and where its
// queries and keys sit (see scoreRule).
type keySource struct {
	keys, values [][]float32
	tk           int
	qPos, kPos   int
	// step, set for a self-attention step, is what commit appends to the
	// session's cache.
	step *pendingStep
}

// pendingStep is a self-attention step's new keys and values, n tokens of
// each sequence, and the cache they go to once the step is checked.
type pendingStep struct {
	st    *attentionState
	cache *kvCache
	k, v  []float32
	n     int
}

// commit appends the step's keys and values to the session's cache and
// returns the whole cache.
func (p *pendingStep) commit() (keys, values [][]float32) {
	p.cache.appendRows(p.k, p.v, p.n)
	if len(p.st.caches) == 1 {
		p.st.caches[0] = p.cache
	} else {
		p.st.caches = []*kvCache{p.cache}
	}
	return p.cache.keys, p.cache.values
}

// keySource finds the keys and values of a pass: the memory's projections
// (cross-attention; cached in a session), this pass's own (self-attention),
// or the session's cache plus the new tokens' (a self-attention step).
// What lasts only for the pass is carved off sc.
func (c *sdpaPrepared) keySource(in sdpaInputs, st *attentionState, past int, sc *scratch) keySource {
	x := in.x
	switch {
	case in.memory != nil:
		src := keySource{qPos: past}
		src.keys, src.values, src.tk = c.memoryKV(*in.memory, st, sc)
		if st == nil && !c.topLeft {
			src.qPos = src.tk - x.T // bottom-right: the last query sees every key
		}
		return src
	case st == nil:
		keys, values := c.passKV(x, sc)
		return keySource{keys: keys, values: values, tk: x.T}
	}
	k, v := c.projectKV(x, past, sc)
	var cache *kvCache
	if st.seqs != 0 { // a step has succeeded: its cache is the session's
		cache = st.caches[0]
	} else {
		kvWidth := c.kvHeads * c.headDim
		cache = newKVCache(x.B, kvWidth, kvWidth)
	}
	st.pending = pendingStep{st: st, cache: cache, k: k, v: v, n: x.T}
	return keySource{tk: cache.len() + x.T, qPos: past, kPos: cache.start, step: &st.pending}
}

// normalize applies qk_norm to rows of heads·head_dim projected queries
// or keys: each head, or each whole row with rms_projection.
func (c *sdpaPrepared) normalize(x []float32, rows, heads int, weight *tensor.Dense) {
	if c.qkWhole {
		rmsNormHeads(x, rows, 1, heads*c.headDim, floats(weight), c.qkEps)
		return
	}
	rmsNormHeads(x, rows, heads, c.headDim, floats(weight), c.qkEps)
}

// projectKV projects the keys and values of x's tokens, which sit at
// positions past, past+1, ..., normalizes the keys if qk_norm is on and
// rotates them if RoPE is.
func (c *sdpaPrepared) projectKV(x seqs, past int, sc *scratch) (k, v []float32) {
	kvWidth := c.kvHeads * c.headDim
	if sc != nil {
		k, v = sc.floats(x.rows()*kvWidth), sc.floats(x.rows()*kvWidth)
	} else {
		k, v = make([]float32, x.rows()*kvWidth), make([]float32, x.rows()*kvWidth)
	}
	c.k.apply(k, x.data, x.rows())
	c.v.apply(v, x.data, x.rows())
	if c.kNorm != nil {
		c.normalize(k, x.rows(), c.kvHeads, c.kNorm)
	}
	if c.rot != nil {
		c.rot.apply(k, kvWidth, x.B, x.T, c.kvHeads, past)
	}
	return k, v
}

// memoryKV returns the per-sequence keys and values of the memory and their
// count. A step reuses the projections cached in st while the memory's
// values stay the same. (Refreshing that cache is not a change of the
// session: it is a pure function of the memory.)
func (c *sdpaPrepared) memoryKV(m seqs, st *attentionState, sc *scratch) (keys, values [][]float32, tk int) {
	kvWidth := c.kvHeads * c.headDim
	if st == nil {
		keys, values = c.passKV(m, sc)
		return keys, values, m.T
	}
	if st.sameMemory(m) {
		cache := st.caches[0]
		return cache.keys, cache.values, m.T
	}
	k, v := c.projectKV(m, 0, nil)
	keys, values = perSequence(k, m.B, m.T*kvWidth), perSequence(v, m.B, m.T*kvWidth)
	st.rememberMemory(m)
	st.caches = []*kvCache{{kWidth: kvWidth, vWidth: kvWidth, keys: keys, values: values}}
	return keys, values, m.T
}

// passKV projects the keys and values of x's tokens for one pass, into sc,
// and views them per sequence.
func (c *sdpaPrepared) passKV(x seqs, sc *scratch) (keys, values [][]float32) {
	n := x.T * c.kvHeads * c.headDim
	k, v := c.projectKV(x, 0, sc)
	views := sc.sequenceViews(2 * x.B)
	keys, values = views[:x.B:x.B], views[x.B:]
	for b := range x.B {
		keys[b], values[b] = k[b*n:(b+1)*n:(b+1)*n], v[b*n:(b+1)*n:(b+1)*n]
	}
	return keys, values
}

// perSequence cuts a (B·T, width) projection into B per-sequence slices of
// n = T·width values, each capped at its end so that appending to one
// never writes into the next.
func perSequence(x []float32, seqs, n int) [][]float32 {
	out := make([][]float32, seqs)
	for b := range out {
		out[b] = x[b*n : (b+1)*n : (b+1)*n]
	}
	return out
}

// OutputShape is x's shape: the output has x's width d.
func (s *SDPA) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	x, _, err := s.streamShapes(inputs)
	if err != nil {
		return nil, err
	}
	return x.shape(x.D), nil
}

// FLOPs counts q_proj on x, k_proj and v_proj on the keys' source (x, or
// the memory of cross-attention), the attention products of num_heads
// query heads (grouped-query attention shares keys, not products), and
// out_proj. RoPE, ALiBi, softcap, qk_norm, sinks, score modifications and
// masks are elementwise: not counted.
func (s *SDPA) FLOPs(inputs []tensor.Shape) (int64, error) {
	if err := positive("num_heads", s.NumHeads); err != nil {
		return 0, err
	}
	// The defaults Validate resolves.
	kvHeads, headDim := s.NumKVHeads, s.HeadDim
	if kvHeads == 0 {
		kvHeads = s.NumHeads
	}
	if headDim == 0 {
		headDim = s.D / s.NumHeads
	}
	x, kv, err := s.streamShapes(inputs)
	if err != nil {
		return 0, err
	}
	var c flopCount
	c.linear(x.rows(), s.D, s.NumHeads*headDim)
	c.linear(kv.rows(), kv.D, 2*kvHeads*headDim)
	c.attention(x.B, s.NumHeads, x.T, kv.T, headDim, headDim)
	c.linear(x.rows(), s.NumHeads*headDim, s.D)
	return c.result()
}

// streamShapes reads the shapes of x and of the keys' tokens (x, or the
// memory), checked as split checks the tensors. The mask, last, is
// counted, not checked: it does not shape the output.
func (s *SDPA) streamShapes(inputs []tensor.Shape) (x, kv seqs, err error) {
	sorted, err := sortSDPAInputs(inputs, s.Mask != "")
	if err != nil {
		return x, kv, err
	}
	if x, err = shapeSeqs(sorted.x); err != nil {
		return x, kv, err
	}
	if err := x.expectWidth("d", s.D); err != nil {
		return x, kv, err
	}
	if !sorted.cross {
		return x, x, nil
	}
	dMemory := s.DMemory
	if dMemory == 0 {
		dMemory = s.D
	}
	if kv, err = shapeSeqs(sorted.memory); err != nil {
		return x, kv, fmt.Errorf("memory: %w", err)
	}
	return x, kv, checkMemory(x, kv, dMemory)
}
