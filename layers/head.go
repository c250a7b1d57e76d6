package layers

import (
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// head is one attention head with its own query, key and value
// projections: the engine of attention.self, attention.causal and each head
// of attention.multihead_wrapper.
type head struct {
	proj    qkv
	scale   float32
	causal  bool
	dropout float64
	// contextLength is the longest sequence accepted; zero means no limit.
	contextLength int
}

// attendInto projects the input, attends, and writes the context vectors to
// out (width d_out, row stride ldOut) and the weights, if wanted, to w.
func (h *head) attendInto(run *registry.Run, in seqs, out []float32, ldOut int, w weightsView) error {
	opt, err := attentionOptions(run, h.scale, h.causal, h.dropout)
	if err != nil {
		return err
	}
	q, k, v := h.proj.project(in.data, in.rows())
	d := h.proj.out
	heads{
		q: q, k: k, v: v, out: out,
		ldq: d, ldk: d, ldv: d, ldOut: ldOut,
		seqs: in.B, tokens: in.T, count: 1,
		dk: d, dv: d,
	}.attend(opt, w)
	return nil
}

// forward is the whole forward pass of a single-head layer.
func (h *head) forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := singleInput(inputs)
	if err != nil {
		return nil, err
	}
	if err := in.expectWidth("d_in", h.proj.in); err != nil {
		return nil, err
	}
	if h.contextLength > 0 {
		if err := checkContext(in.T, h.contextLength); err != nil {
			return nil, err
		}
	}
	weights, w, err := newWeights(run, in, 1)
	if err != nil {
		return nil, err
	}
	out, data := in.newOutput(h.proj.out)
	if err := h.attendInto(run, in, data, h.proj.out, w); err != nil {
		return nil, err
	}
	observe(run, weights)
	return out, nil
}
