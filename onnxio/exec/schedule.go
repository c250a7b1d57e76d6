package exec

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// sort orders the nodes so that each runs after the producers of its
// inputs (Kahn's algorithm, keeping the model's order where it is free to).
// It names the node and input when an input has no source, and the nodes
// involved when they form a cycle.
func (b *builder) sort(nodes []*node) ([]*node, error) {
	waiting := make([]int, len(nodes)) // by position: inputs not yet available
	readers := make(map[int][]int)     // slot: positions of nodes reading it
	var ready []int
	outOfOrder := false
	for p, n := range nodes {
		for k, s := range n.in {
			switch {
			case s < 0 || b.known[s]:
			case b.producer[s] < 0:
				return nil, fmt.Errorf("node %s (%s): input %q is not produced by any node, nor a graph input or initializer", n.label(), n.op, n.inName[k])
			default:
				if b.producer[s] > n.index && !outOfOrder {
					outOfOrder = true
					b.warn("nodes are not in topological order (node %s (%s) reads %q before node %s (%s) writes it); they run in dependency order, as in ONNX Runtime",
						n.label(), n.op, n.inName[k], b.prepared[b.producer[s]].label(), b.prepared[b.producer[s]].op)
				}
				waiting[p]++
				readers[s] = append(readers[s], p)
			}
		}
		if waiting[p] == 0 {
			ready = append(ready, p)
		}
	}
	order := make([]*node, 0, len(nodes))
	for len(ready) > 0 {
		slices.Sort(ready) // keep the model's order among ready nodes
		p := ready[0]
		ready = ready[1:]
		order = append(order, nodes[p])
		for _, s := range nodes[p].out {
			if s < 0 {
				continue
			}
			for _, r := range readers[s] {
				if waiting[r]--; waiting[r] == 0 {
					ready = append(ready, r)
				}
			}
		}
	}
	if len(order) < len(nodes) {
		var stuck []string
		for p, n := range nodes {
			if waiting[p] > 0 {
				stuck = append(stuck, n.label()+" ("+n.op+")")
			}
		}
		return nil, fmt.Errorf("the graph has a cycle: nodes %s wait on each other", strings.Join(stuck, ", "))
	}
	return order, nil
}

// foldConstants runs the Constant nodes once, now, and stores their
// outputs like initializers.
func (b *builder) foldConstants(order []*node) error {
	for _, n := range order {
		if n.op != "Constant" {
			continue
		}
		outs, err := n.spec.run(newRunCtx(context.Background(), nil), n, nil)
		if err != nil {
			return fmt.Errorf("node %s (%s): %w", n.label(), n.op, err)
		}
		b.g.consts[n.out[0]] = outs[0]
	}
	return nil
}

// schedule keeps the non-Constant nodes that some graph output depends on,
// in order, and gives each the list of slots it is the last reader of, so
// that Run drops intermediates as soon as they are dead.
func (b *builder) schedule(order []*node) {
	needed := make([]bool, len(b.g.consts))
	for _, s := range b.g.outSlots {
		needed[s] = true
	}
	var keep []*node
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		live := false
		for _, s := range n.out {
			live = live || s >= 0 && needed[s]
		}
		if !live || n.op == "Constant" {
			continue
		}
		for _, s := range n.in {
			if s >= 0 {
				needed[s] = true
			}
		}
		keep = append(keep, n)
	}
	slices.Reverse(keep)

	isOutput := make([]bool, len(b.g.consts))
	for _, s := range b.g.outSlots {
		isOutput[s] = true
	}
	last := make([]int, len(b.g.consts)) // slot: position of its last reader
	for i := range last {
		last[i] = -1
	}
	for p, n := range keep {
		for _, s := range n.in {
			if s >= 0 {
				last[s] = p
			}
		}
		for _, s := range n.out { // outputs nobody reads die at once
			if s >= 0 && last[s] < p {
				last[s] = p
			}
		}
	}
	for s, p := range last {
		if p >= 0 && !isOutput[s] {
			keep[p].free = append(keep[p].free, s)
		}
	}
	b.g.nodes = keep
	b.packWeights()
	b.g.plans = &planCache{}
}
