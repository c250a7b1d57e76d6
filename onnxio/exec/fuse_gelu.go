package exec

import (
	"github.com/attnrun/attnrun/internal/kernels"
)

// GELU fusion. BERT-like models export the exact GELU as five elementwise
// nodes,
//
//	Mul(Mul(x, Add(Erf(Div(x, c)), a)), s)   (c = √2, a = 1, s = 0.5)
//
// each a pass over the whole hidden activation (B·T·4d values) and an
// allocation. The fused node computes them in one pass split across the
// processors (kernels.GeluErf32), with the same float32 operations in the
// same order, so it gives the nodes' bits. The graph's structure is
// checked in New (every intermediate read by the next node only); that x
// is float32 and c, a and s one-element float32 values on every run, the
// original nodes running otherwise.

func init() {
	registerFusion(fusion{name: "gelu", order: 25, run: fuseGelu})
}

// fusedGeluOp is the op name of fused GELU nodes.
const fusedGeluOp = "FusedGelu"

// fuseGelu rewrites every GELU chain of order into a fused node.
func fuseGelu(f *fuser, order []*node) []*node {
	replaced := map[*node]*node{}
	for _, n := range order {
		if n.op == "Erf" && !f.removed[n] {
			if fused, last := f.matchGelu(n); fused != nil {
				replaced[last] = fused
			}
		}
	}
	return f.replace(order, replaced)
}

// matchGelu tries to read erf as the Erf of a GELU chain; it returns the
// fused node and the chain's last node, or nils.
func (f *fuser) matchGelu(erf *node) (*node, *node) {
	single := func(n *node, op string, ins int) bool {
		return n != nil && n.op == op && !f.removed[n] && len(n.in) == ins && len(n.out) == 1 && n.out[0] >= 0 && !slicesHas(n.in, -1)
	}
	if !single(erf, "Erf", 1) || !f.private(erf.in[0]) || !f.private(erf.out[0]) {
		return nil, nil
	}
	div := f.producer(erf.in[0])
	if !single(div, "Div", 2) {
		return nil, nil
	}
	x := div.in[0]
	add := f.reader(erf.out[0])
	if !single(add, "Add", 2) || !f.private(add.out[0]) {
		return nil, nil
	}
	a := other(add, erf.out[0])
	mul := f.reader(add.out[0])
	if !single(mul, "Mul", 2) || other(mul, add.out[0]) != x || !f.private(mul.out[0]) {
		return nil, nil
	}
	scale := f.reader(mul.out[0])
	if !single(scale, "Mul", 2) {
		return nil, nil
	}
	s := other(scale, mul.out[0])
	if a < 0 || s < 0 || a == x || s == x || a == erf.out[0] || s == mul.out[0] {
		return nil, nil
	}
	var c chainInputs
	xi := c.arg(x, div.inName[0])
	ci := c.arg(div.in[1], div.inName[1])
	ai := c.arg(a, nameOf(add, a))
	si := c.arg(s, nameOf(scale, s))
	original := []*node{div, erf, add, mul, scale}
	for _, n := range original {
		f.removed[n] = true
	}
	run := func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		src, ok := in[xi].data.([]float32)
		cv, ok1 := scalar32(in[ci])
		av, ok2 := scalar32(in[ai])
		sv, ok3 := scalar32(in[si])
		if !ok || in[xi].dtype != Float32 || !ok1 || !ok2 || !ok3 || in[ci].dtype != Float32 || in[ai].dtype != Float32 || in[si].dtype != Float32 {
			return runOriginal(rc, original, n.in, in, scale.out[0])
		}
		out, err := rc.allocFull(n, Float32, in[xi].shape)
		if err != nil {
			return nil, err
		}
		kernels.GeluErf32(out.data.([]float32), src, cv, av, sv)
		return rc.one(out)
	}
	fused := &node{
		index: scale.index, name: scale.name, op: fusedGeluOp, opset: scale.opset,
		spec: &opSpec{minIn: len(c.slots), maxIn: len(c.slots), minOut: 1, maxOut: 1, run: run},
		in:   c.slots, out: []int{scale.out[0]}, inName: c.names,
	}
	return fused, scale
}

// other returns the input slot of two-input node n that is not s (the
// second when both are), or -1 when neither is.
func other(n *node, s int) int {
	switch {
	case n.in[0] == s:
		return n.in[1]
	case n.in[1] == s:
		return n.in[0]
	}
	return -1
}

// nameOf returns the name n's input s has.
func nameOf(n *node, s int) string {
	for k, in := range n.in {
		if in == s {
			return n.inName[k]
		}
	}
	return ""
}

// slicesHas reports whether s holds v.
func slicesHas(s []int, v int) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}
