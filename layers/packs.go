package layers

import (
	"sync"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/registry"
)

// Packed weights. A product with an nn.Linear weight of more than a few
// rows packs the weight into the blocks the GEMM kernels read; for a short
// sentence packing is most of the product's work. Layers that implement
// ParamsChanged (registry.ParamsWatcher) keep the packed copy from one
// forward pass to the next: their weights register in a weightPacks when
// the layer is provisioned, the first long-enough product packs a weight,
// and ParamsChanged drops every copy, so the next product packs the new
// values. Writing a parameter in place (through Params) cannot be seen, so
// whoever writes one after a forward pass calls ParamsChanged, as
// models.Model's Init, LoadStateDict and LoadWeights do and as
// Model.ParamsChanged does for a caller's own writes.
//
// The copies count against the model's memory budget; a weight whose copy
// does not fit is packed on every product instead, which costs time, not
// correctness. Products on the packed copy give the same bits.

// packMinRows is the fewest rows of x a product packs the weight for:
// kernels.Gemm computes x·Wᵀ of up to 4 rows as dot products reading W
// in place, faster than packing it, so those stay on Gemm (same bits).
const packMinRows = 5

// packedWeights gives a layer that provisions with provisionPacked its
// packed copies and its ParamsChanged: embedded (with the tag `yaml:"-"`,
// it is no config field) in every such layer.
type packedWeights struct {
	packs *weightPacks
}

// ParamsChanged drops the packed copies of the weights (registry.ParamsWatcher):
// call it after writing parameters through Params once the layer has run.
func (p *packedWeights) ParamsChanged() { p.packs.drop() }

// weightPacks is the nn.Linear weights of one layer that keep packed
// copies, and the budget the copies are reserved from.
type weightPacks struct {
	mem     registry.Memory
	mu      sync.Mutex // guards weights and the reservation of copies
	weights []*linearWeights
}

// add registers l to keep a packed copy; nothing on a nil weightPacks.
func (p *weightPacks) add(l *linearWeights) {
	if p == nil {
		return
	}
	l.packs = p
	p.weights = append(p.weights, l)
}

// drop lets every packed copy go and gives back its bytes; nothing on a
// nil weightPacks.
func (p *weightPacks) drop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.weights {
		if l.packed.Swap(nil) != nil {
			p.mem.Release(l.packBytes())
		}
	}
}

// packBytes is what l's packed copy is counted as: the weight's size (the
// copy pads its columns to the kernel's panel width, a few percent more).
func (l *linearWeights) packBytes() int64 {
	return budget.Bytes(int64(l.in)*int64(l.out), 4)
}

// packedFor returns the packed copy of l's weight for a product of rows
// rows, packing it on first use; nil when l keeps no copy, the product
// is too short to gain from one, or the budget has no room for it.
func (l *linearWeights) packedFor(rows int) *kernels.PackedB {
	if l.packs == nil || rows < packMinRows {
		return nil
	}
	if p := l.packed.Load(); p != nil {
		return p
	}
	l.packs.mu.Lock()
	defer l.packs.mu.Unlock()
	if p := l.packed.Load(); p != nil { // packed meanwhile
		return p
	}
	if l.packs.mem.Reserve(l.packBytes(), "packed weight") != nil {
		return nil
	}
	p := kernels.PackB(true, l.in, l.out, l.w, l.in)
	l.packed.Store(p)
	return p
}
