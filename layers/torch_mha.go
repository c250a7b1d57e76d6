package layers

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/attnrun/attnrun/internal/attn"
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// TorchMHA is attention.torch_mha, a drop-in for torch.nn.MultiheadAttention:
// the same fields, the same state_dict, the same numbers.
//
// Inputs are PyTorch's forward arguments in order: [query] is
// self-attention (key = value = query), [query, memory] cross-attention
// (key = value = memory), [query, key, value] all three; then
// key_padding_mask and attn_mask, each present when its field is set.
// With batch_first false (PyTorch's default) 3-D inputs are (L, B, E);
// with true, (B, L, E); 2-D inputs are one unbatched sequence (L, E).
//
// Masks follow nn.MultiheadAttention: key_padding_mask is (B, S), or (S)
// unbatched; attn_mask is (L, S) or (B·num_heads, L, S). A "bool" mask is
// given as 0/1 floats and nonzero means masked out (PyTorch's True); a
// "float" mask is added to the scores. Both masks are added together
// (PyTorch 1.13 accepts a float key_padding_mask only without attn_mask;
// PyTorch 2.x adds them, as attnrun does).
//
// need_weights: the weights reach the run's hook when one is set. With
// average_attn_weights (default true, as PyTorch) the hook receives their
// mean over heads as (B, 1, L, S), PyTorch's (B, L, S) with a head axis of
// 1; with false, (B, num_heads, L, S). A query whose keys are all masked
// outputs NaN, as in PyTorch (masked_rows: zeros gives zeros instead).
type TorchMHA struct {
	// EmbedDim is the width of the query and of the output.
	EmbedDim int `yaml:"embed_dim"`
	// NumHeads is the number of heads; it must divide embed_dim.
	NumHeads int `yaml:"num_heads"`
	// Dropout is the probability of zeroing an attention weight in train mode.
	Dropout float64 `yaml:"dropout"`
	// Bias gives the in-projections and out_proj a bias (default true).
	Bias bool `yaml:"bias"`
	// AddBiasKV appends the learned bias_k and bias_v to the keys and values.
	AddBiasKV bool `yaml:"add_bias_kv"`
	// AddZeroAttn appends a zero key and value after them.
	AddZeroAttn bool `yaml:"add_zero_attn"`
	// KDim is the width of the key input (default embed_dim).
	KDim int `yaml:"kdim"`
	// VDim is the width of the value input (default embed_dim).
	VDim int `yaml:"vdim"`
	// BatchFirst reads 3-D inputs as (B, L, E) instead of (L, B, E).
	BatchFirst bool `yaml:"batch_first"`
	// KeyPaddingMask is the kind of the key_padding_mask input: "" (none),
	// "bool" or "float".
	KeyPaddingMask string `yaml:"key_padding_mask"`
	// AttnMask is the kind of the attn_mask input: "" (none), "bool" or "float".
	AttnMask string `yaml:"attn_mask"`
	// AverageAttnWeights averages the hook's weights over heads (default true).
	AverageAttnWeights bool `yaml:"average_attn_weights"`
	// MaskedRows is the output of a query that sees no key: "nan"
	// (default, as PyTorch) or "zeros".
	MaskedRows string `yaml:"masked_rows"`

	c             *mhaPrepared
	packedWeights `yaml:"-"` // the packed copies of the weights (packs.go), ParamsChanged
}

func init() {
	registry.Register(registry.Info{
		ID:      "attention.torch_mha",
		Summary: "drop-in torch.nn.MultiheadAttention: packed or separate in-projections, bias_k/v, zero attention, masks",
		New: func() registry.Layer {
			return &TorchMHA{Bias: true, AverageAttnWeights: true, MaskedRows: "nan"}
		},
	})
}

// mhaPrepared is what Validate prepared; Forward reads only this.
type mhaPrepared struct {
	embed, heads, kdim, vdim int
	separate                 bool
	// inProj is in_proj_weight (3E, E), or nil with separate weights.
	inProj, qProj, kProj, vProj *tensor.Dense
	inBias                      *tensor.Dense // (3E), or nil
	biasK, biasV                *tensor.Dense // (1, 1, E), or nil
	out                         *linearWeights
	// in is the query, key and value in-projections as nn.Linear views
	// of inProj (or qProj, kProj, vProj) and inBias.
	in                   [3]*linearWeights
	zeroAttn, batchFirst bool
	kpm, attn            attn.MaskKind // 0: no such input
	average, nanRows     bool
	dropout              float64
}

var (
	_ registry.Provisioner  = (*TorchMHA)(nil)
	_ registry.Stepper      = (*TorchMHA)(nil)
	_ registry.OutputShaper = (*TorchMHA)(nil)
	_ registry.FLOPCounter  = (*TorchMHA)(nil)
)

// Validate checks the fields as nn.MultiheadAttention's constructor does and
// allocates zeroed parameters.
func (m *TorchMHA) Validate() error { return m.Provision(nil) }

// PlanParams lists the parameters nn.MultiheadAttention has for this
// config without allocating them.
func (m *TorchMHA) PlanParams() ([]registry.ParamShape, error) { return planParams(m.prepare) }

// Provision checks the fields and allocates zeroed parameters from mem.
func (m *TorchMHA) Provision(mem registry.Memory) (err error) {
	m.c, m.packs, err = provisionPacked(mem, m.prepare)
	return err
}

func (m *TorchMHA) prepare(a paramAlloc) (*mhaPrepared, error) {
	err := firstError(
		positive("embed_dim", m.EmbedDim),
		positive("num_heads", m.NumHeads),
		probability("dropout", m.Dropout),
	)
	if err != nil {
		return nil, err
	}
	c := &mhaPrepared{embed: m.EmbedDim, heads: m.NumHeads, kdim: m.KDim, vdim: m.VDim,
		zeroAttn: m.AddZeroAttn, batchFirst: m.BatchFirst, average: m.AverageAttnWeights, dropout: m.Dropout}
	if c.embed%c.heads != 0 {
		return nil, fmt.Errorf("num_heads %d does not divide embed_dim %d", c.heads, c.embed)
	}
	if c.kdim == 0 {
		c.kdim = c.embed
	}
	if c.vdim == 0 {
		c.vdim = c.embed
	}
	if err := firstError(positive("kdim", c.kdim), positive("vdim", c.vdim)); err != nil {
		return nil, err
	}
	if c.kpm, err = mhaMaskKind("key_padding_mask", m.KeyPaddingMask); err != nil {
		return nil, err
	}
	if c.attn, err = mhaMaskKind("attn_mask", m.AttnMask); err != nil {
		return nil, err
	}
	switch m.MaskedRows {
	case "nan":
		c.nanRows = true
	case "zeros":
	default:
		return nil, fmt.Errorf("masked_rows %q is not \"nan\" or \"zeros\"", m.MaskedRows)
	}
	if err := c.allocate(a, m.Bias, m.AddBiasKV); err != nil {
		return nil, err
	}
	return c, nil
}

// mhaMaskKind maps a mask field to how its input is read.
func mhaMaskKind(field, kind string) (attn.MaskKind, error) {
	switch kind {
	case "":
		return 0, nil
	case "bool":
		return attn.MaskDrop, nil
	case "float":
		return attn.MaskAdd, nil
	}
	return 0, fmt.Errorf("%s %q is not \"\" (none), \"bool\" (True masks out, as PyTorch) or \"float\" (added to the scores)", field, kind)
}

// allocate makes the parameters nn.MultiheadAttention has for this config.
func (c *mhaPrepared) allocate(a paramAlloc, bias, biasKV bool) error {
	e := c.embed
	c.separate = c.kdim != e || c.vdim != e
	var err error
	if c.separate {
		if c.qProj, err = a.zeros("q_proj_weight", e, e); err != nil {
			return err
		}
		if c.kProj, err = a.zeros("k_proj_weight", e, c.kdim); err != nil {
			return err
		}
		if c.vProj, err = a.zeros("v_proj_weight", e, c.vdim); err != nil {
			return err
		}
	} else if c.inProj, err = a.zeros("in_proj_weight", 3*e, e); err != nil {
		return err
	}
	if bias {
		if c.inBias, err = a.zeros("in_proj_bias", 3*e); err != nil {
			return err
		}
	}
	if biasKV {
		if c.biasK, err = a.zeros("bias_k", 1, 1, e); err != nil {
			return err
		}
		if c.biasV, err = a.zeros("bias_v", 1, 1, e); err != nil {
			return err
		}
	}
	if !a.planning() {
		c.viewInProjections(a)
	}
	c.out, err = newLinearWeights(a, "out_proj", e, e, bias)
	return err
}

// viewInProjections views the query, key and value in-projections as
// nn.Linear weights over the parameters' storage, registered with a's
// packs so that they keep packed copies.
func (c *mhaPrepared) viewInProjections(a paramAlloc) {
	e := c.embed
	ins := [3]int{e, c.kdim, c.vdim}
	for which := range c.in {
		var w, b []float32
		if c.separate {
			w = floats([]*tensor.Dense{c.qProj, c.kProj, c.vProj}[which])
		} else {
			w = floats(c.inProj)[which*e*e : (which+1)*e*e]
		}
		if c.inBias != nil {
			b = floats(c.inBias)[which*e : (which+1)*e]
		}
		c.in[which] = viewLinearWeights(ins[which], e, w, b)
		a.packs.add(c.in[which])
	}
}

// Params lists the parameters in nn.MultiheadAttention's state_dict order:
// in_proj_weight (or q_proj_weight, k_proj_weight, v_proj_weight when kdim
// or vdim differ from embed_dim), in_proj_bias, bias_k, bias_v,
// out_proj.weight, out_proj.bias. The init schemes are PyTorch's
// (_reset_parameters): xavier_uniform_ in-projections, zero biases,
// xavier_normal_ bias_k and bias_v, nn.Linear's out_proj.weight. PyTorch
// draws out_proj.weight first, so a seeded init matches it in distribution,
// not number for number.
func (m *TorchMHA) Params() []registry.Param {
	if m.c == nil {
		return nil
	}
	c := m.c
	e := float64(c.embed)
	var ps []registry.Param
	if c.separate {
		ps = append(ps,
			registry.Param{Name: "q_proj_weight", Value: c.qProj, Init: xavierUniform(e, e)},
			registry.Param{Name: "k_proj_weight", Value: c.kProj, Init: xavierUniform(float64(c.kdim), e)},
			registry.Param{Name: "v_proj_weight", Value: c.vProj, Init: xavierUniform(float64(c.vdim), e)})
	} else {
		ps = append(ps, registry.Param{Name: "in_proj_weight", Value: c.inProj, Init: xavierUniform(e, 3*e)})
	}
	if c.inBias != nil {
		ps = append(ps, registry.Param{Name: "in_proj_bias", Value: c.inBias, Init: registry.ConstantInit(0)})
	}
	if c.biasK != nil {
		normal := registry.NormalInit(0, math.Sqrt(2/(e+e)))
		ps = append(ps,
			registry.Param{Name: "bias_k", Value: c.biasK, Init: normal},
			registry.Param{Name: "bias_v", Value: c.biasV, Init: normal})
	}
	out := c.out.params("out_proj")
	if len(out) == 2 {
		out[1].Init = registry.ConstantInit(0)
	}
	return append(ps, out...)
}

// xavierUniform is nn.init.xavier_uniform_ for a weight with the given fans.
func xavierUniform(fanIn, fanOut float64) registry.Init {
	b := math.Sqrt(6 / (fanIn + fanOut))
	return registry.UniformInit(-b, b)
}

// Forward computes nn.MultiheadAttention's attn_output.
func (m *TorchMHA) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if m.c == nil {
		return nil, errNotValidated
	}
	return m.c.forward(run, inputs, nil)
}

// NewState starts a decoding session.
func (m *TorchMHA) NewState() registry.State { return &attentionState{} }

// Step runs the next tokens of the query. Self-attention (one input, or
// key given as the same tensor as query) caches the keys and values and
// needs attn_mask, (n, past+n) or (B·num_heads, n, past+n), to be causal;
// key_padding_mask is then (B, past+n). Cross-attention (key and value from
// other inputs, passed whole at every step) caches their projections.
func (m *TorchMHA) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if m.c == nil {
		return nil, errNotValidated
	}
	st, ok := state.(*attentionState)
	if !ok || st == nil {
		return nil, fmt.Errorf("state %T is not from this layer's NewState", state)
	}
	return m.c.forward(run, inputs, st)
}

// mhaInputs is a forward pass's inputs, batch-major.
type mhaInputs struct {
	query, key, value seqs
	kpm, attn         *tensor.Dense
	// self is set when key is the query: one input, or the same tensor.
	self bool
}

// mhaSorted is a torch_mha layer's inputs in their roles: tensors for a
// forward pass, value names for an export, shapes for OutputShape. A
// memory serves as key and value, a lone query as all three; a mask not
// configured is the zero T.
type mhaSorted[T any] struct {
	query, key, value T
	kpm, attn         T
}

// sortMHAInputs sorts [query], [query, memory] or [query, key, value],
// then the masks configured (key_padding_mask if kpm, attn_mask if attn).
func sortMHAInputs[T any](inputs []T, kpm, attn bool) (mhaSorted[T], error) {
	var s mhaSorted[T]
	masks := 0
	if kpm {
		masks++
	}
	if attn {
		masks++
	}
	n := len(inputs) - masks
	if n < 1 || n > 3 {
		return s, fmt.Errorf("takes [query], [query, memory] or [query, key, value], then %d mask input(s); got %d input(s)", masks, len(inputs))
	}
	s.query, s.key, s.value = inputs[0], inputs[min(1, n-1)], inputs[n-1]
	tail := inputs[n:]
	if kpm {
		s.kpm, tail = tail[0], tail[1:]
	}
	if attn {
		s.attn = tail[0]
	}
	return s, nil
}

// split sorts the inputs into query, key, value and the masks, checks
// their widths, and makes them batch-major.
func (c *mhaPrepared) split(inputs []*tensor.Dense) (mhaInputs, error) {
	var in mhaInputs
	sorted, err := sortMHAInputs(inputs, c.kpm != 0, c.attn != 0)
	if err != nil {
		return in, err
	}
	in.kpm, in.attn = sorted.kpm, sorted.attn
	streams := [3]*tensor.Dense{sorted.query, sorted.key, sorted.value}
	names := []string{"query", "key", "value"}
	widths := []int{c.embed, c.kdim, c.vdim}
	var ins [3]seqs
	for i, x := range streams {
		if i > 0 && x == streams[i-1] && widths[i] == widths[i-1] {
			ins[i] = ins[i-1] // the same tensor: read (and transpose) it once
			continue
		}
		s, err := readSeqs(x)
		if err != nil {
			return in, fmt.Errorf("%s: %w", names[i], err)
		}
		if s.D != widths[i] {
			return in, fmt.Errorf("%s has width %d, want %d", names[i], s.D, widths[i])
		}
		ins[i] = c.batchMajor(s)
	}
	in.query, in.key, in.value = ins[0], ins[1], ins[2]
	in.self = sorted.key == sorted.query
	if in.key.batched != in.query.batched || in.key.B != in.query.B {
		return in, fmt.Errorf("key shape %s does not match query shape %s: want the same batch",
			fmtShape(in.key.dense.Shape()), fmtShape(in.query.dense.Shape()))
	}
	if in.value.batched != in.key.batched || in.value.B != in.key.B || in.value.T != in.key.T {
		return in, fmt.Errorf("value shape %s does not match key shape %s: want the same batch and length",
			fmtShape(in.value.dense.Shape()), fmtShape(in.key.dense.Shape()))
	}
	return in, nil
}

// batchMajor returns a 3-D sequence-first (L, B, E) input as (B, L, E)
// (a copy); batch-first and 2-D inputs are returned as they are.
func (c *mhaPrepared) batchMajor(s seqs) seqs {
	if c.batchFirst || !s.batched {
		return s
	}
	return transposeSeqs(s)
}

// transposeSeqs swaps the first two axes of a 3-D input: (A, C, D) becomes
// (C, A, D).
func transposeSeqs(s seqs) seqs {
	data := make([]float32, len(s.data))
	for a := range s.B {
		for t := range s.T {
			copy(data[(t*s.B+a)*s.D:(t*s.B+a+1)*s.D], s.data[(a*s.T+t)*s.D:(a*s.T+t+1)*s.D])
		}
	}
	out := seqs{B: s.T, T: s.B, D: s.D, batched: true, data: data}
	out.dense = tensor.New(tensor.WithShape(out.B, out.T, out.D), tensor.WithBacking(data))
	return out
}

// forward is nn.MultiheadAttention.forward's slow path (the one that
// returns weights) on batch-major data: a whole pass when st is nil, or
// the next tokens of a decoding session.
func (c *mhaPrepared) forward(run *registry.Run, inputs []*tensor.Dense, st *attentionState) (*tensor.Dense, error) {
	in, err := c.split(inputs)
	if err != nil {
		return nil, err
	}
	p, rng, err := activeDropout(run, "dropout", c.dropout)
	if err != nil {
		return nil, err
	}
	q, e := in.query, c.embed
	b, l, s := q.B, q.T, in.key.T
	var cache *kvCache // a self-attention step's
	if st != nil {
		if cache, err = c.stepCache(in, st); err != nil {
			return nil, err
		}
		if cache != nil {
			s = cache.len() + l
		}
	}
	sk := s + c.extraKeys()
	rule := scoreRule{scale: invSqrt(e / c.heads), nanRows: c.nanRows, addsHidden: true, dropout: p, rng: rng}
	if rule.masks, err = c.masks(in, b, l, s); err != nil {
		return nil, err
	}
	weights, err := newStepWeights(run, b, c.heads, l, sk)
	if err != nil {
		return nil, err
	}

	// Everything is checked: from here on the state changes.
	query := make([]float32, b*l*e)
	c.project(query, q, 0)
	keys, values := c.keysFor(in, st, cache)
	context := make([]float32, b*l*e)
	hd := e / c.heads
	a := attention{
		seqs: b, tq: l, tk: sk, qHeads: c.heads, kvHeads: c.heads, dk: hd, dv: hd,
		q: query, ldq: e, keys: keys, values: values, ldk: e, ldv: e,
		out: context, ldOut: e, rule: rule,
	}
	a.run(weightData(weights))
	out, data := q.newOutput(run, e)
	c.out.apply(data, context, b*l)
	if q.batched && !c.batchFirst {
		out = transposeSeqs(seqs{B: b, T: l, D: e, batched: true, data: data}).dense
	}
	if st != nil {
		st.seqs, st.tokens = b, st.tokens+l
	}
	if weights != nil && c.average {
		weights = averageHeads(weights)
	}
	observe(run, weights)
	return out, nil
}

// stepCache checks that a step on in can run and returns the KV cache of
// a self-attention step (nil for cross-attention, whose keys are the
// memory's).
func (c *mhaPrepared) stepCache(in mhaInputs, st *attentionState) (*kvCache, error) {
	if _, err := stateOf[attentionState](st, in.query.B); err != nil {
		return nil, err
	}
	if !in.self {
		return nil, nil
	}
	if c.attn == 0 {
		return nil, errors.New("a step of self-attention needs the attn_mask input, (n, past+n), to be causal: without it a query would attend to later tokens in the full pass but not in a step")
	}
	if st.seqs == 0 { // no step has succeeded yet: start with an empty cache for this batch
		st.caches = []*kvCache{newKVCache(in.query.B, c.embed, c.embed)}
	}
	return st.caches[0], nil
}

// masks reads the mask inputs for l queries against s keys (before the
// extra ones, which no mask hides).
func (c *mhaPrepared) masks(in mhaInputs, b, l, s int) ([]attn.Mask, error) {
	var views []attn.Mask
	if c.kpm != 0 {
		mv, err := c.keyPaddingView(in.kpm, in.query.batched, b, s)
		if err != nil {
			return nil, err
		}
		views = append(views, mv)
	}
	if c.attn != 0 {
		mv, err := c.attnMaskView(in.attn, b, l, s)
		if err != nil {
			return nil, err
		}
		views = append(views, mv)
	}
	return views, nil
}

// keysFor returns the per-sequence keys and values of a pass: projected
// from key and value (a whole pass); the self-attention cache with the new
// tokens appended; or the memory's projections, cached in the session.
func (c *mhaPrepared) keysFor(in mhaInputs, st *attentionState, cache *kvCache) (keys, values [][]float32) {
	switch {
	case st == nil:
		return c.keysValues(in.key, in.value)
	case cache != nil:
		n := in.query.rows()
		k, v := make([]float32, n*c.embed), make([]float32, n*c.embed)
		c.project(k, in.query, 1)
		c.project(v, in.query, 2)
		cache.appendRows(k, v, in.query.T)
		return c.withExtras(cache.keys, cache.values)
	case st.sameMemory(in.key, in.value):
		return st.caches[0].keys, st.caches[0].values
	}
	keys, values = c.keysValues(in.key, in.value)
	st.rememberMemory(in.key, in.value)
	st.caches = []*kvCache{{kWidth: c.embed, vWidth: c.embed, keys: keys, values: values}}
	return keys, values
}

// extraKeys counts the keys appended after the given ones: bias_k and the
// zero key of add_zero_attn.
func (c *mhaPrepared) extraKeys() int {
	n := 0
	if c.biasK != nil {
		n++
	}
	if c.zeroAttn {
		n++
	}
	return n
}

// keysValues projects key and value sequence by sequence and appends the
// extra keys and values.
func (c *mhaPrepared) keysValues(key, value seqs) (keys, values [][]float32) {
	e, sk := c.embed, key.T+c.extraKeys()
	keys, values = make([][]float32, key.B), make([][]float32, key.B)
	for i := range key.B {
		keys[i], values[i] = make([]float32, key.T*e, sk*e), make([]float32, key.T*e, sk*e)
		c.project(keys[i], sequence(key, i), 1)
		c.project(values[i], sequence(value, i), 2)
	}
	return c.appendExtras(keys, values)
}

// withExtras returns the cached keys and values with the extra ones
// appended, copying them only if there are extras.
func (c *mhaPrepared) withExtras(keys, values [][]float32) ([][]float32, [][]float32) {
	if c.extraKeys() == 0 {
		return keys, values
	}
	k, v := make([][]float32, len(keys)), make([][]float32, len(values))
	for i := range keys {
		k[i], v[i] = slices.Clone(keys[i]), slices.Clone(values[i])
	}
	return c.appendExtras(k, v)
}

// appendExtras appends bias_k and bias_v, then add_zero_attn's zero key and
// value, to every sequence's keys and values. Attention does not depend on
// the order of the keys, so in a step they may follow the cached ones.
func (c *mhaPrepared) appendExtras(keys, values [][]float32) ([][]float32, [][]float32) {
	zeros := make([]float32, c.embed)
	for i := range keys {
		if c.biasK != nil {
			keys[i] = append(keys[i], floats(c.biasK)...)
			values[i] = append(values[i], floats(c.biasV)...)
		}
		if c.zeroAttn {
			keys[i] = append(keys[i], zeros...)
			values[i] = append(values[i], zeros...)
		}
	}
	return keys, values
}

// sequence returns sequence i of a batch-major input as a one-sequence input.
func sequence(s seqs, i int) seqs {
	n := s.T * s.D
	return seqs{B: 1, T: s.T, D: s.D, data: s.data[i*n : (i+1)*n]}
}

// project applies in-projection which (0 query, 1 key, 2 value) to the rows
// of x, writing rows of width embed_dim to y.
func (c *mhaPrepared) project(y []float32, x seqs, which int) {
	c.in[which].apply(y, x.data, x.rows())
}

// keyPaddingView reads key_padding_mask: (B, S), or (S) for an unbatched
// query.
func (c *mhaPrepared) keyPaddingView(x *tensor.Dense, batched bool, b, s int) (attn.Mask, error) {
	data, shape, err := maskData("key_padding_mask", x)
	if err != nil {
		return attn.Mask{}, err
	}
	want := []int{b, s}
	if !batched {
		want = []int{s}
	}
	if !slices.Equal(shape, want) {
		return attn.Mask{}, fmt.Errorf("key_padding_mask has shape %s, want %s", fmtShape(shape), fmtShape(want))
	}
	return attn.Mask{Kind: c.kpm, Values: data, SB: s, SJ: 1, Cols: s}, nil
}

// attnMaskView reads attn_mask: (L, S) for every sequence and head, or
// (B·num_heads, L, S).
func (c *mhaPrepared) attnMaskView(x *tensor.Dense, b, l, s int) (attn.Mask, error) {
	data, shape, err := maskData("attn_mask", x)
	if err != nil {
		return attn.Mask{}, err
	}
	switch {
	case slices.Equal(shape, []int{l, s}):
		return attn.Mask{Kind: c.attn, Values: data, SI: s, SJ: 1, Cols: s}, nil
	case slices.Equal(shape, []int{b * c.heads, l, s}):
		return attn.Mask{Kind: c.attn, Values: data, SB: c.heads * l * s, SH: l * s, SI: s, SJ: 1, Cols: s}, nil
	}
	return attn.Mask{}, fmt.Errorf("attn_mask has shape %s, want %s or %s",
		fmtShape(shape), fmtShape([]int{l, s}), fmtShape([]int{b * c.heads, l, s}))
}

// averageHeads returns the mean over heads of (B, H, L, S) weights as
// (B, 1, L, S), computed as PyTorch does: the sum divided by H.
func averageHeads(w *tensor.Dense) *tensor.Dense {
	shape := w.Shape()
	b, h, n := shape[0], shape[1], shape[2]*shape[3]
	src := floats(w)
	data := make([]float32, b*n)
	for i := range b {
		avg := data[i*n : (i+1)*n]
		for j := range h {
			for k, v := range src[(i*h+j)*n : (i*h+j+1)*n] {
				avg[k] += v
			}
		}
		for k := range avg {
			avg[k] /= float32(h)
		}
	}
	return tensor.New(tensor.WithShape(b, 1, shape[2], shape[3]), tensor.WithBacking(data))
}

// OutputShape is the query's shape, in its layout (sequence first unless
// batch_first): nn.MultiheadAttention's attn_output.
func (m *TorchMHA) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if _, err := m.streamShapes(inputs); err != nil {
		return nil, err
	}
	return inputs[0].Clone(), nil
}

// FLOPs counts the in-projections of query, key and value, the attention
// products over the keys (bias_k and the zero key of add_zero_attn
// included) and out_proj: with L queries, S keys and E = embed_dim,
// 2·B·L·E² + 2·B·S·(kdim+vdim)·E + 4·B·L·S'·E + 2·B·L·E², S' = S + extras.
func (m *TorchMHA) FLOPs(inputs []tensor.Shape) (int64, error) {
	if err := positive("num_heads", m.NumHeads); err != nil {
		return 0, err
	}
	ins, err := m.streamShapes(inputs)
	if err != nil {
		return 0, err
	}
	q, k, v := ins[0], ins[1], ins[2]
	keys := k.T
	if m.AddBiasKV {
		keys++
	}
	if m.AddZeroAttn {
		keys++
	}
	e := m.EmbedDim
	var c flopCount
	c.linear(q.rows(), e, e)
	c.linear(k.rows(), k.D, e)
	c.linear(v.rows(), v.D, e)
	c.attention(q.B, m.NumHeads, q.T, keys, e/m.NumHeads, e/m.NumHeads)
	c.linear(q.rows(), e, e)
	return c.result()
}

// streamShapes reads the shapes of the query, key and value streams (see
// sortMHAInputs), with B and T in place whatever the layout, and checks
// their widths against embed_dim, kdim and vdim and their batches and
// lengths against each other. The masks after them are counted, not
// checked.
func (m *TorchMHA) streamShapes(inputs []tensor.Shape) (ins [3]seqs, err error) {
	e, kdim, vdim := m.EmbedDim, m.KDim, m.VDim
	if kdim == 0 {
		kdim = e
	}
	if vdim == 0 {
		vdim = e
	}
	sorted, err := sortMHAInputs(inputs, m.KeyPaddingMask != "", m.AttnMask != "")
	if err != nil {
		return ins, err
	}
	shapes := [3]tensor.Shape{sorted.query, sorted.key, sorted.value}
	names, fields, widths := []string{"query", "key", "value"}, []string{"embed_dim", "kdim", "vdim"}, []int{e, kdim, vdim}
	for i, shape := range shapes {
		s, err := shapeSeqs(shape)
		if err != nil {
			return ins, fmt.Errorf("%s: %w", names[i], err)
		}
		if s.D != widths[i] {
			return ins, fmt.Errorf("%s mismatch: %s has width %d, want %d", fields[i], names[i], s.D, widths[i])
		}
		if s.batched && !m.BatchFirst { // (L, B, E): sequence first
			s.B, s.T = s.T, s.B
		}
		ins[i] = s
	}
	q, k, v := ins[0], ins[1], ins[2]
	if k.batched != q.batched || k.B != q.B {
		return ins, fmt.Errorf("key shape %s does not match query shape %s: want the same batch",
			fmtShape(sorted.key), fmtShape(sorted.query))
	}
	if v.batched != k.batched || v.B != k.B || v.T != k.T {
		return ins, fmt.Errorf("value shape %s does not match key shape %s: want the same batch and length",
			fmtShape(sorted.value), fmtShape(sorted.key))
	}
	return ins, nil
}
