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
	width := 3 * h.proj.out
	sc := getScratch(in.rows() * width)
	defer sc.release()
	h.projectHeads(in, sc.floats(in.rows()*width), width, out, ldOut).attendAll(opt, w, sc)
	return nil
}

// projectHeads projects the input into y, each row [q | k | v] at row
// stride ld, and returns the head as a view of y that writes its context
// vectors to out (row stride ldOut).
func (h *head) projectHeads(in seqs, y []float32, ld int, out []float32, ldOut int) heads {
	h.proj.projectInto(y, ld, in.data, in.rows())
	d := h.proj.out
	return heads{
		q: y, k: y[d:], v: y[2*d:], out: out,
		ldq: ld, ldk: ld, ldv: ld, ldOut: ldOut,
		seqs: in.B, tokens: in.T, count: 1,
		dk: d, dv: d,
	}
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
	out, data := in.newOutput(run, h.proj.out)
	if err := h.attendInto(run, in, data, h.proj.out, w); err != nil {
		return nil, err
	}
	observe(run, weights)
	return out, nil
}
