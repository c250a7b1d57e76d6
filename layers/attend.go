package layers

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// heads describes attention over B sequences of T tokens for one or more
// heads side by side, laid out as PyTorch lays out a (B, T, H·dh)
// projection: token t of sequence b is row b·T+t, and head h starts at
// column h·dk of the queries and keys and h·dv of the values and output
// (or h·step of all three, when the projections are interleaved).
// Each (sequence, head) pair is a strided kernels.Head view: nothing is
// copied.
type heads struct {
	q, k, v, out         []float32
	ldq, ldk, ldv, ldOut int
	seqs, tokens, count  int // B, T and the number of heads
	dk, dv               int
	// step, if nonzero, is the distance in columns from one head's
	// queries, keys and values to the next head's: 3·dh when each head's
	// projection is [q | k | v] (qkv.projectInto).
	step int
}

// weightsView is where a group of heads writes its attention weights: the
// (B, H, T, T) buffer of the whole layer (nil when no hook wants them), and
// the index of the group's first head among its H.
type weightsView struct {
	data  []float32
	heads int
	first int
}

// steps returns how many columns apart consecutive heads' queries (and
// keys) and values start.
func (hs *heads) steps() (qk, v int) {
	if hs.step != 0 {
		return hs.step, hs.step
	}
	return hs.dk, hs.dv
}

// view is the kernels.Head of head h of sequence b.
func (hs *heads) view(b, h int) kernels.Head {
	qStep, vStep := hs.steps()
	row := b * hs.tokens
	return kernels.Head{
		Q: hs.q[row*hs.ldq+h*qStep:], LdQ: hs.ldq,
		K: hs.k[row*hs.ldk+h*qStep:], LdK: hs.ldk,
		V: hs.v[row*hs.ldv+h*vStep:], LdV: hs.ldv,
		Out: hs.out[row*hs.ldOut+h*hs.dv:], LdOut: hs.ldOut,
		Tq: hs.tokens, Tk: hs.tokens, D: hs.dk, Dv: hs.dv,
	}
}

// attend runs kernels.Attend for every (sequence, head) pair, sequence by
// sequence and head by head, so dropout masks are reproducible for a seed.
func (hs heads) attend(opt kernels.AttentionOptions, w weightsView) {
	tt := hs.tokens * hs.tokens
	for b := 0; b < hs.seqs; b++ {
		for h := 0; h < hs.count; h++ {
			if w.data != nil {
				i := (b*w.heads + w.first + h) * tt
				opt.Weights = w.data[i : i+tt]
			}
			kernels.Attend(hs.view(b, h), opt)
		}
	}
}

// allAtOnce reports whether attendAll may hand every head to the kernel at
// once: no weights to write and no dropout, whose mask must be drawn in
// a fixed order.
func allAtOnce(opt kernels.AttentionOptions, w weightsView) bool {
	return w.data == nil && opt.Dropout == 0
}

// attendAll runs every (sequence, head) pair. On the fast path they go to
// kernels.AttendBatch in one call, which spreads them over the processors;
// otherwise they run in order, as attend runs them. sc holds the views.
func (hs heads) attendAll(opt kernels.AttentionOptions, w weightsView, sc *scratch) {
	if !allAtOnce(opt, w) {
		hs.attend(opt, w)
		return
	}
	list := sc.headViews(hs.seqs * hs.count)
	for b := range hs.seqs {
		for h := range hs.count {
			list[b*hs.count+h] = hs.view(b, h)
		}
	}
	kernels.AttendBatch(list, opt)
}

// one returns head h alone, as a group of one head.
func (hs heads) one(h int) heads {
	qStep, vStep := hs.steps()
	one := hs
	one.q, one.k, one.v = hs.q[h*qStep:], hs.k[h*qStep:], hs.v[h*vStep:]
	one.out = hs.out[h*hs.dv:]
	one.count, one.step = 1, 0
	return one
}

// invSqrt is the 1/√d score scale of scaled dot-product attention.
func invSqrt(d int) float32 { return float32(1 / math.Sqrt(float64(d))) }

// attentionOptions builds the kernel options of one forward pass of a seed
// layer, whose reference modules write attention out as
// softmax(scores.masked_fill(mask, −inf))·V: the kernel's causal frontier
// replaces scores as masked_fill does, and a query with nothing but −Inf
// scores is NaN, as softmax gives. Dropout applies in train mode only.
func attentionOptions(run *registry.Run, scale float32, causal bool, dropout float64) (kernels.AttentionOptions, error) {
	p, rng, err := activeDropout(run, "dropout", dropout)
	if err != nil {
		return kernels.AttentionOptions{}, err
	}
	return kernels.AttentionOptions{Scale: scale, Causal: causal, EmptyRowsNaN: true, Dropout: p, RNG: rng}, nil
}

// activeDropout returns the dropout probability in effect for this run and
// the RNG that draws its mask: zero in eval mode, and an error in train
// mode when there is no RNG to draw from.
func activeDropout(run *registry.Run, field string, p float64) (float32, *rand.Rand, error) {
	if run == nil || !run.Train || p == 0 {
		return 0, nil, nil
	}
	if run.RNG == nil {
		return 0, nil, fmt.Errorf("%s %g in train mode needs run.RNG (a seeded *rand.Rand), got nil", field, p)
	}
	return float32(p), run.RNG, nil
}

// newWeights allocates the (B, H, T, T) attention weights when the run has
// a hook that wants them; otherwise it returns nil and an empty view.
// A (T, d) input counts as B = 1.
func newWeights(run *registry.Run, in seqs, numHeads int) (*tensor.Dense, weightsView, error) {
	if !run.WantWeights() {
		return nil, weightsView{}, nil
	}
	t, err := newZeros("attention weights", in.B, numHeads, in.T, in.T)
	if err != nil {
		return nil, weightsView{}, err
	}
	return t, weightsView{data: floats(t), heads: numHeads}, nil
}

// observe hands the weights to the run's hook, if they were computed.
func observe(run *registry.Run, weights *tensor.Dense) {
	if weights != nil {
		run.Observe(weights)
	}
}
