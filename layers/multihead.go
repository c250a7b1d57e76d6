package layers

import (
	"errors"
	"fmt"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// MultiHead is attention.multihead: one query, key and value projection of
// width d_out, split into num_heads heads of d_out/num_heads, attended head
// by head and projected back by out_proj. It equals the seeds'
// MultiHeadAttention module (view/transpose into heads, causal mask,
// scores scaled by 1/√head_dim, dropout on the weights, nn.Linear out_proj).
type MultiHead struct {
	// DIn is the width of the input tokens.
	DIn int `yaml:"d_in"`
	// DOut is the width of the projections and the output.
	DOut int `yaml:"d_out"`
	// ContextLength is the longest sequence the layer accepts.
	ContextLength int `yaml:"context_length"`
	// NumHeads is the number of heads; it must divide d_out.
	NumHeads int `yaml:"num_heads"`
	// Dropout is the probability of zeroing an attention weight in train mode.
	Dropout float64 `yaml:"dropout"`
	// QKVBias gives the query, key and value projections a bias.
	QKVBias bool `yaml:"qkv_bias"`
	// OutBias gives out_proj a bias (default true, as nn.Linear).
	OutBias bool `yaml:"out_bias"`
	// Causal lets token t attend to tokens ≤ t only (default true).
	Causal bool `yaml:"causal"`

	// What Validate prepared; Forward reads only these.
	proj          qkv
	outProj       *linearWeights
	numHeads      int
	contextLength int
	causal        bool
	dropout       float64
	packedWeights `yaml:"-"` // the packed copies of the weights (packs.go), ParamsChanged
}

var (
	_ registry.Provisioner  = (*MultiHead)(nil)
	_ registry.OutputShaper = (*MultiHead)(nil)
	_ registry.FLOPCounter  = (*MultiHead)(nil)
	_ registry.Stepper      = (*MultiHead)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "attention.multihead",
		Summary: "multi-head attention: shared Wq, Wk, Wv split into heads, then out_proj (MultiHeadAttention)",
		New:     func() registry.Layer { return &MultiHead{OutBias: true, Causal: true} },
	})
}

// Validate checks the sizes, that num_heads divides d_out and the dropout
// probability, and allocates zeroed parameters.
func (m *MultiHead) Validate() error { return m.Provision(nil) }

// PlanParams lists the projections' parameters without allocating them.
func (m *MultiHead) PlanParams() ([]registry.ParamShape, error) { return planParams(m.prepare) }

// Provision checks the fields and allocates zeroed parameters from mem.
func (m *MultiHead) Provision(mem registry.Memory) error {
	m.outProj = nil
	p, packs, err := provisionPacked(mem, m.prepare)
	if err != nil {
		return err
	}
	m.proj, m.outProj, m.packs = p.proj, p.outProj, packs
	m.numHeads, m.contextLength, m.causal, m.dropout = m.NumHeads, m.ContextLength, m.Causal, m.Dropout
	return nil
}

// multiHeadWeights are the projections of attention.multihead.
type multiHeadWeights struct {
	proj    qkv
	outProj *linearWeights
}

func (m *MultiHead) prepare(a paramAlloc) (multiHeadWeights, error) {
	var none multiHeadWeights
	err := firstError(
		positive("d_in", m.DIn),
		positive("d_out", m.DOut),
		positive("context_length", m.ContextLength),
		positive("num_heads", m.NumHeads),
		probability("dropout", m.Dropout),
	)
	if err != nil {
		return none, err
	}
	if m.DOut%m.NumHeads != 0 {
		return none, fmt.Errorf("num_heads %d does not divide d_out %d", m.NumHeads, m.DOut)
	}
	proj, err := newQKV(a, "", m.DIn, m.DOut, false, m.QKVBias)
	if err != nil {
		return none, err
	}
	outProj, err := newLinearWeights(a, "out_proj", m.DOut, m.DOut, m.OutBias)
	if err != nil {
		return none, err
	}
	return multiHeadWeights{proj: proj, outProj: outProj}, nil
}

// Params lists W_query, W_key, W_value and out_proj, each nn.Linear's weight
// then bias.
func (m *MultiHead) Params() []registry.Param {
	if m.outProj == nil {
		return nil
	}
	return append(m.proj.params(""), m.outProj.params("out_proj")...)
}

// Forward maps (T, d_in) or (B, T, d_in) to (T, d_out) or (B, T, d_out);
// T may not exceed context_length. The three projections are one GEMM over
// all B·T rows; the heads are strided views of it, attended in place and
// all at once; their outputs land side by side, which is PyTorch's
// transpose(1, 2).view(b, T, d_out) without a copy, ready for out_proj.
func (m *MultiHead) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := readyInput(m.outProj != nil, inputs)
	if err != nil {
		return nil, err
	}
	if err := in.expectWidth("d_in", m.proj.in); err != nil {
		return nil, err
	}
	if err := checkContext(in.T, m.contextLength); err != nil {
		return nil, err
	}
	dOut, headDim := m.proj.out, m.proj.out/m.numHeads
	opt, err := attentionOptions(run, invSqrt(headDim), m.causal, m.dropout)
	if err != nil {
		return nil, err
	}
	weights, w, err := newWeights(run, in, m.numHeads)
	if err != nil {
		return nil, err
	}
	rows := in.rows()
	sc := getScratch(rows * 4 * dOut)
	defer sc.release()
	projected, context := sc.floats(rows*3*dOut), sc.floats(rows*dOut)
	m.proj.projectInto(projected, 3*dOut, in.data, rows)
	heads{
		q: projected, k: projected[dOut:], v: projected[2*dOut:], out: context,
		ldq: 3 * dOut, ldk: 3 * dOut, ldv: 3 * dOut, ldOut: dOut,
		seqs: in.B, tokens: in.T, count: m.numHeads,
		dk: headDim, dv: headDim,
	}.attendAll(opt, w, sc)
	out, data := in.newOutput(run, dOut)
	m.outProj.apply(data, context, rows)
	observe(run, weights)
	return out, nil
}

// OutputShape is the input's shape with width d_out; T may not exceed
// context_length.
func (m *MultiHead) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return widthShape(inputs, "d_in", m.DIn, m.ContextLength, m.DOut)
}

// FLOPs counts the q, k, v projections, the attention products of all
// heads and out_proj: 2·B·T·d_in·3·d_out + 4·B·T²·d_out + 2·B·T·d_out².
func (m *MultiHead) FLOPs(inputs []tensor.Shape) (int64, error) {
	if err := positive("num_heads", m.NumHeads); err != nil {
		return 0, err
	}
	x, err := oneFLOPInput(inputs, "d_in", m.DIn)
	if err != nil {
		return 0, err
	}
	var c flopCount
	c.linear(x.rows(), m.DIn, 3*m.DOut)
	c.attention(x.B, m.NumHeads, x.T, x.T, m.DOut/m.NumHeads, m.DOut/m.NumHeads)
	c.linear(x.rows(), m.DOut, m.DOut)
	return c.result()
}

// NewState starts a decoding session with an empty KV cache.
func (m *MultiHead) NewState() registry.State { return &attentionState{} }

// Step attends the new tokens to every token so far and projects the heads
// with out_proj; the layer must be causal, and the session may not grow
// past context_length.
func (m *MultiHead) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if m.outProj == nil {
		return nil, errNotValidated
	}
	if !m.causal {
		return nil, errors.New("a step of non-causal attention would see future tokens: only causal: true runs incrementally")
	}
	in, st, err := stepStart(state, inputs, m.proj.in, m.contextLength, 1, m.proj.out)
	if err != nil {
		return nil, err
	}
	dOut := m.proj.out
	sc := getScratch(in.rows() * dOut)
	defer sc.release()
	context := sc.floats(in.rows() * dOut)
	w, err := causalStep(run, in, m.proj, st.caches[0], m.numHeads, invSqrt(dOut/m.numHeads), m.dropout, context, dOut)
	if err != nil {
		return nil, err
	}
	out, data := in.newOutput(run, dOut)
	m.outProj.apply(data, context, in.rows())
	st.seqs, st.tokens = in.B, st.tokens+in.T
	observe(run, asWeights(w, in.B, m.numHeads, in.T, st.tokens))
	return out, nil
}
