package attnmath

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/internal/kernels"
)

// Attention describes attention over the heads of a batch of sequences,
// and what to compute besides the output. The zero value of every
// optional field is the common choice.
type Attention struct {
	// Batch is the number of sequences, B.
	Batch int
	// Heads is the number of query heads, H.
	Heads int
	// KVHeads is the number of key and value heads; 0 means Heads. It must
	// divide Heads: query head h reads key/value head h/(Heads/KVHeads),
	// the grouping of grouped-query attention (repeat_interleave).
	KVHeads int
	// Queries and Keys are the sequence lengths Tq and Tk.
	Queries, Keys int
	// HeadDim is the width d of one head's queries and keys.
	HeadDim int
	// ValueDim is the width of one head's values and output; 0 means
	// HeadDim.
	ValueDim int
	// Scale multiplies q·k before the mask and the softmax; 0 means
	// 1/√HeadDim.
	Scale float32
	// Causal lets query i see keys j ≤ i + Keys − Queries only: with as
	// many queries as keys the lower triangle; with fewer, the queries are
	// the last tokens, as in a decoding step against a cache. Later keys
	// are hidden whatever their score, as masked_fill(−inf) hides them.
	Causal bool
	// Mask, if non-nil, is added to the scaled scores before the softmax:
	// Queries×Keys, shared by every sequence and head, or
	// Batch×Queries×Keys, one block per sequence. −Inf hides a key; being
	// added, it turns a NaN or +Inf score into NaN, as an additive mask
	// does in PyTorch.
	Mask []float32
	// ZeroEmptyRows gives a query that sees no key (every key behind the
	// causal frontier or masked by −Inf) weights and output of 0, as
	// FlashAttention and PyTorch ≥ 2.5's SDPA do. Without it they are NaN,
	// as softmax(scores)·v written out gives.
	ZeroEmptyRows bool
	// Weights, if non-nil, receives the attention weights,
	// Batch×Heads×Queries×Keys: the weights that multiply v, after the
	// mask and the softmax. Asking for them costs O(Tq·Tk) memory and
	// time per head; without them Attend's memory is O(Tk·d).
	Weights []float32
}

// Attend computes, for every sequence b and query head h,
//
//	out[b, :, h] = softmax(Scale · q[b, :, h] · k[b, :, g]ᵀ + Mask) · v[b, :, g]
//
// with g the key/value head of h, later keys hidden when Causal. The
// operands are row-major with the heads side by side in each token's row,
// as a Linear of width heads·d produces them and as PyTorch's
// view(B, T, H, d) reads them:
//
//	q    Batch × Queries × (Heads·HeadDim)
//	k    Batch × Keys    × (KVHeads·HeadDim)
//	v    Batch × Keys    × (KVHeads·ValueDim)
//	out  Batch × Queries × (Heads·ValueDim)
//
// out must not overlap the others. The heads run on all processors unless
// the weights are wanted. NaN and ±Inf come out as in PyTorch's
// softmax(scores)·v: a NaN or +Inf score makes its query's row NaN, and a
// NaN or Inf value reaches every query's output in its column, even a
// query whose weight for it is 0.
func Attend(out, q, k, v []float32, a Attention) error {
	a, err := a.resolve()
	if err != nil {
		return err
	}
	ldQ, ldK, ldV, ldOut := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim, a.KVHeads*a.ValueDim, a.Heads*a.ValueDim
	for _, o := range []struct {
		name   string
		s      []float32
		layout string
		dims   []int
	}{
		{"q", q, "Batch×Queries×(Heads·HeadDim)", []int{a.Batch, a.Queries, ldQ}},
		{"k", k, "Batch×Keys×(KVHeads·HeadDim)", []int{a.Batch, a.Keys, ldK}},
		{"v", v, "Batch×Keys×(KVHeads·ValueDim)", []int{a.Batch, a.Keys, ldV}},
		{"out", out, "Batch×Queries×(Heads·ValueDim)", []int{a.Batch, a.Queries, ldOut}},
	} {
		if err := operand("Attend", o.name, o.s, o.layout, o.dims...); err != nil {
			return err
		}
	}
	if a.Weights != nil {
		if err := operand("Attend", "Weights", a.Weights, "Batch×Heads×Queries×Keys", a.Batch, a.Heads, a.Queries, a.Keys); err != nil {
			return err
		}
	}
	perSequence, err := a.maskStride()
	if err != nil {
		return err
	}
	if a.Batch == 0 || a.Heads == 0 || a.Queries == 0 {
		return nil
	}
	if a.Keys == 0 {
		// softmax over no scores is empty, and an empty product is 0.
		clear(out[:a.Batch*a.Queries*ldOut])
		return nil
	}
	group := a.Heads / a.KVHeads
	heads := make([]kernels.Head, 0, a.Batch*a.Heads)
	for b := range a.Batch {
		qRow, kRow := b*a.Queries, b*a.Keys
		for h := range a.Heads {
			g := h / group
			head := kernels.Head{
				Q: q[qRow*ldQ+h*a.HeadDim:], LdQ: ldQ,
				K: k[kRow*ldK+g*a.HeadDim:], LdK: ldK,
				V: v[kRow*ldV+g*a.ValueDim:], LdV: ldV,
				Out: out[qRow*ldOut+h*a.ValueDim:], LdOut: ldOut,
				Tq: a.Queries, Tk: a.Keys, D: a.HeadDim, Dv: a.ValueDim,
			}
			if a.Mask != nil {
				head.Mask, head.LdMask = a.Mask[b*perSequence:], a.Keys
			}
			heads = append(heads, head)
		}
	}
	kernels.AttendBatch(heads, kernels.AttentionOptions{
		Scale:        a.Scale,
		Causal:       a.Causal,
		EmptyRowsNaN: !a.ZeroEmptyRows,
		Weights:      a.Weights,
	})
	return nil
}

// resolve fills in the defaults and checks the sizes.
func (a Attention) resolve() (Attention, error) {
	if a.KVHeads == 0 {
		a.KVHeads = a.Heads
	}
	if a.ValueDim == 0 {
		a.ValueDim = a.HeadDim
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"Batch", a.Batch}, {"Heads", a.Heads}, {"KVHeads", a.KVHeads}, {"Queries", a.Queries}, {"Keys", a.Keys}, {"HeadDim", a.HeadDim}, {"ValueDim", a.ValueDim}} {
		if f.n < 0 {
			return a, fmt.Errorf("attnmath.Attend: %s is %d, must not be negative", f.name, f.n)
		}
	}
	if a.Heads > 0 && (a.KVHeads == 0 || a.Heads%a.KVHeads != 0) {
		return a, fmt.Errorf("attnmath.Attend: KVHeads %d does not divide Heads %d", a.KVHeads, a.Heads)
	}
	if math.IsNaN(float64(a.Scale)) {
		return a, fmt.Errorf("attnmath.Attend: Scale is NaN")
	}
	if a.Scale == 0 && a.HeadDim > 0 {
		a.Scale = float32(1 / math.Sqrt(float64(a.HeadDim)))
	}
	for _, dims := range [][]int{
		{a.Heads, a.HeadDim}, {a.Heads, a.ValueDim}, {a.Queries, a.Keys},
		{a.Batch, a.Queries, a.Heads, a.HeadDim}, {a.Batch, a.Keys, a.KVHeads, a.HeadDim},
		{a.Batch, a.Keys, a.KVHeads, a.ValueDim}, {a.Batch, a.Queries, a.Heads, a.ValueDim},
		{a.Batch, a.Heads, a.Queries, a.Keys},
	} {
		if _, ok := product(dims...); !ok {
			return a, fmt.Errorf("attnmath.Attend: the sizes %s overflow", sizes(dims))
		}
	}
	return a, nil
}

// maskStride checks the mask's length and returns how far apart the
// sequences' blocks are: 0 for one block shared by all.
func (a Attention) maskStride() (int, error) {
	if a.Mask == nil {
		return 0, nil
	}
	block := a.Queries * a.Keys
	switch len(a.Mask) {
	case block:
		return 0, nil
	case a.Batch * block:
		return block, nil
	}
	return 0, fmt.Errorf("attnmath.Attend: Mask holds %d floats, want Queries×Keys = %d or Batch×Queries×Keys = %d",
		len(a.Mask), block, a.Batch*block)
}
