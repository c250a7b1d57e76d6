package exec

import (
	"fmt"
	"slices"

	"github.com/attnrun/attnrun/onnxio/graph"
)

// Fusions. New rewrites chains of nodes into fused nodes that compute the
// same values faster (fuse_attention.go, fuse_bias.go). Each rewrite is a
// pass that registers itself from its file's init; the passes run one
// after the other over the node order, before schedule drops the nodes
// nothing reads any more.

// fusion is one rewrite pass.
type fusion struct {
	// name identifies the pass.
	name string
	// order places the pass: passes run by increasing order (attention
	// chains before the bias pairs their projections would otherwise
	// form).
	order int
	// run rewrites order and returns the new order. The fuser indexes the
	// graph as it was before any pass; nodes an earlier pass swallowed are
	// in fuser.removed.
	run func(f *fuser, order []*node) []*node
}

// fusions are the registered passes, sorted by order.
var fusions []fusion

// registerFusion adds a pass; it panics on a name or order registered
// twice, a programming error.
func registerFusion(p fusion) {
	for _, q := range fusions {
		if q.name == p.name || q.order == p.order {
			panic(fmt.Sprintf("exec: fusion %q registered twice (or at the order of %q)", p.name, q.name))
		}
	}
	fusions = append(fusions, p)
	slices.SortFunc(fusions, func(a, b fusion) int { return a.order - b.order })
}

// fuser holds what the passes need to know about the graph: who writes
// and who reads each value slot (package onnxio/graph's index), and which
// nodes a pass has already taken.
type fuser struct {
	g       *Graph
	uses    *graph.Uses[int, *node]
	removed map[*node]bool
}

// fuseNodes runs every registered fusion over order and returns the new
// order. It runs before schedule, which then drops the nodes nothing reads
// any more (the Transposes a fused node reads through).
func (b *builder) fuseNodes(order []*node) []*node {
	f := &fuser{g: b.g, uses: graph.NewUses[int, *node](-1), removed: map[*node]bool{}}
	for _, s := range b.g.outSlots {
		f.uses.MarkOutput(s)
	}
	for _, n := range order {
		f.uses.Add(n, n.in, n.out)
	}
	for _, p := range fusions {
		order = p.run(f, order)
	}
	return order
}

// replace returns order with each node of replaced swapped for its fused
// node and the removed nodes left out.
func (f *fuser) replace(order []*node, replaced map[*node]*node) []*node {
	out := make([]*node, 0, len(order))
	for _, n := range order {
		switch {
		case replaced[n] != nil:
			out = append(out, replaced[n])
		case !f.removed[n]:
			out = append(out, n)
		}
	}
	return out
}

// producer returns the node writing slot s, or nil.
func (f *fuser) producer(s int) *node {
	n, _ := f.uses.Producer(s)
	return n
}

// reader returns the last node reading slot s, or nil.
func (f *fuser) reader(s int) *node {
	n, _ := f.uses.LastReader(s)
	return n
}

// fuserView is the graph as package match's matchers see it: prepared
// nodes and value slots.
type fuserView struct{ f *fuser }

// Producer returns the node writing slot s.
func (v fuserView) Producer(s int) (*node, bool) {
	n := v.f.producer(s)
	return n, n != nil
}

// Op is n's op type.
func (fuserView) Op(n *node) string { return n.op }

// Inputs are n's input slots.
func (fuserView) Inputs(n *node) []int { return n.in }

// Private reports whether slot s is read by one node input only and is no
// graph output.
func (v fuserView) Private(s int) bool { return v.f.private(s) }
