package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// MultiHeadWrapper is attention.multihead_wrapper: num_heads independent
// causal attention heads, each an attention.causal with its own
// projections, their outputs concatenated along the last axis. It equals the
// seeds' MultiHeadAttentionWrapper (an nn.ModuleList of CausalAttention and
// torch.cat(..., dim=-1)).
type MultiHeadWrapper struct {
	// DIn is the width of the input tokens.
	DIn int `yaml:"d_in"`
	// DOut is the output width of each head; the layer outputs
	// num_heads·d_out.
	DOut int `yaml:"d_out"`
	// ContextLength is the longest sequence the layer accepts.
	ContextLength int `yaml:"context_length"`
	// NumHeads is the number of heads.
	NumHeads int `yaml:"num_heads"`
	// Dropout is the probability of zeroing an attention weight in train mode.
	Dropout float64 `yaml:"dropout"`
	// QKVBias gives every projection a bias.
	QKVBias bool `yaml:"qkv_bias"`

	heads []*head
}

var (
	_ registry.Provisioner  = (*MultiHeadWrapper)(nil)
	_ registry.OutputShaper = (*MultiHeadWrapper)(nil)
	_ registry.FLOPCounter  = (*MultiHeadWrapper)(nil)
	_ registry.Stepper      = (*MultiHeadWrapper)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "attention.multihead_wrapper",
		Summary: "num_heads independent causal heads, outputs concatenated (MultiHeadAttentionWrapper)",
		New:     func() registry.Layer { return &MultiHeadWrapper{} },
	})
}

// Validate checks the fields and allocates zeroed parameters for every head.
func (m *MultiHeadWrapper) Validate() error { return m.Provision(nil) }

// PlanParams lists every head's parameters without allocating them.
func (m *MultiHeadWrapper) PlanParams() ([]registry.ParamShape, error) { return planParams(m.prepare) }

// Provision checks the fields and allocates zeroed parameters for every
// head from mem.
func (m *MultiHeadWrapper) Provision(mem registry.Memory) (err error) {
	m.heads, err = provision(mem, m.prepare)
	return err
}

// prepare builds the heads. Each is a module of its own, with its own
// tensors, so num_heads is bounded like other head counts: planning lists
// every head's parameters.
func (m *MultiHeadWrapper) prepare(a paramAlloc) ([]*head, error) {
	if err := positive("num_heads", m.NumHeads); err != nil {
		return nil, err
	}
	if m.NumHeads > maxHeads {
		return nil, fmt.Errorf("num_heads %d is above the limit of %d", m.NumHeads, maxHeads)
	}
	heads := make([]*head, m.NumHeads)
	for i := range heads {
		h, err := newCausalHead(a, headPrefix(i), m.DIn, m.DOut, m.ContextLength, m.Dropout, m.QKVBias)
		if err != nil {
			return nil, err
		}
		heads[i] = h
	}
	return heads, nil
}

// headPrefix names head i's parameters, as nn.ModuleList does.
func headPrefix(i int) string { return fmt.Sprintf("heads.%d", i) }

// Params lists heads.0.W_query.weight, heads.0.W_key.weight, ... head by head.
func (m *MultiHeadWrapper) Params() []registry.Param {
	var ps []registry.Param
	for i, h := range m.heads {
		ps = append(ps, h.proj.params(headPrefix(i))...)
	}
	return ps
}

// Forward maps (T, d_in) or (B, T, d_in) to width num_heads·d_out. Each
// head projects its queries, keys and values with one GEMM into its own
// columns of a shared buffer, then all heads of all sequences attend at
// once, each writing straight into its columns of the output. The
// attention weights go to the hook once, stacked as (B, num_heads, T, T).
func (m *MultiHeadWrapper) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := readyInput(m.heads != nil, inputs)
	if err != nil {
		return nil, err
	}
	first := m.heads[0]
	if err := in.expectWidth("d_in", first.proj.in); err != nil {
		return nil, err
	}
	if err := checkContext(in.T, first.contextLength); err != nil {
		return nil, err
	}
	// The heads differ in their weights only: they share these options.
	opt, err := attentionOptions(run, first.scale, first.causal, first.dropout)
	if err != nil {
		return nil, err
	}
	weights, w, err := newWeights(run, in, len(m.heads))
	if err != nil {
		return nil, err
	}
	d := first.proj.out
	width := len(m.heads) * d
	out, data := in.newOutput(run, width)
	rows := in.rows()
	sc := getScratch(rows * 3 * width)
	defer sc.release()
	projected := sc.floats(rows * 3 * width)
	for i, h := range m.heads {
		h.proj.projectInto(projected[i*3*d:], 3*width, in.data, rows)
	}
	all := heads{
		q: projected, k: projected[d:], v: projected[2*d:], out: data,
		ldq: 3 * width, ldk: 3 * width, ldv: 3 * width, ldOut: width,
		seqs: in.B, tokens: in.T, count: len(m.heads),
		dk: d, dv: d, step: 3 * d,
	}
	if allAtOnce(opt, w) {
		all.attendAll(opt, w, sc)
	} else {
		// Head by head, as separate CausalAttention modules would run, so
		// that the dropout masks are drawn in that order.
		for i := range m.heads {
			w.first = i
			all.one(i).attend(opt, w)
		}
	}
	observe(run, weights)
	return out, nil
}

// OutputShape is the input's shape with width num_heads·d_out; T may not
// exceed context_length.
func (m *MultiHeadWrapper) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if m.NumHeads <= 0 || m.DOut <= 0 || m.DOut > math.MaxInt/m.NumHeads {
		return nil, fmt.Errorf("num_heads %d × d_out %d is not a width", m.NumHeads, m.DOut)
	}
	return widthShape(inputs, "d_in", m.DIn, m.ContextLength, m.NumHeads*m.DOut)
}

// FLOPs counts num_heads single heads:
// H·(2·B·T·d_in·3·d_out + 4·B·T²·d_out).
func (m *MultiHeadWrapper) FLOPs(inputs []tensor.Shape) (int64, error) {
	if err := positive("num_heads", m.NumHeads); err != nil {
		return 0, err
	}
	return headFLOPs(inputs, m.NumHeads, m.DIn, m.DOut)
}

// NewState starts a decoding session with an empty KV cache per head.
func (m *MultiHeadWrapper) NewState() registry.State { return &attentionState{} }

// Step runs every head's step, each with its own cache; the session may
// not grow past context_length.
func (m *MultiHeadWrapper) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if m.heads == nil {
		return nil, errNotValidated
	}
	first := m.heads[0]
	in, st, err := stepStart(state, inputs, first.proj.in, first.contextLength, len(m.heads), first.proj.out)
	if err != nil {
		return nil, err
	}
	dOut := first.proj.out
	width := len(m.heads) * dOut
	out, data := in.newOutput(run, width)
	total := st.tokens + in.T
	weights, err := newStepWeights(run, in.B, len(m.heads), in.T, total)
	if err != nil {
		return nil, err
	}
	all := weightData(weights)
	for i, h := range m.heads {
		w, err := causalStep(run, in, h.proj, st.caches[i], 1, h.scale, h.dropout, data[i*dOut:], width)
		if err != nil {
			return nil, err
		}
		if all != nil {
			n := in.T * total
			for b := range in.B {
				copy(all[(b*len(m.heads)+i)*n:], w[b*n:(b+1)*n])
			}
		}
	}
	st.seqs, st.tokens = in.B, total
	observe(run, weights)
	return out, nil
}
