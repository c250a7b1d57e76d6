package exec

import "github.com/attnrun/attnrun/internal/kernels"

// Products that share an input. Attention projects its input three
// times, to queries, keys and values, and a gated MLP twice: MatMuls (or
// fused MatMul+Adds) of the same x by constant weights. Run one after the
// other, each product's threads meet on their own and wait for the
// slowest at its end; for a short input (one token, a short sentence)
// that is a good part of the products' time. The fused node runs them as
// one set of parts (kernels.GemmPackedSharedContext), each into its own
// output, with the bits each gives alone. It checks on every run that x
// is float32, each weight packed with x's depth and each bias a row of
// its columns, and runs the original nodes one by one otherwise.
//
// The fused node takes the place of the first product: its weights and
// biases are constants, so it reads nothing the first product could not.

func init() {
	registerFusion(fusion{name: "shared input", order: 21, run: fuseSharedInput})
}

// sharedInputOp is the op name of fused products sharing an input.
const sharedInputOp = "SharedInputProducts"

// fuseSharedInput rewrites every set of two or more products by constant
// matrices that read the same value into one fused node.
func fuseSharedInput(f *fuser, order []*node) []*node {
	byInput := map[int][]*node{} // x's slot: the products reading it, in order
	var inputs []int             // x's slots in order of their first product
	for _, n := range order {
		if f.removed[n] || !f.productByConstant(n) {
			continue
		}
		x := n.in[0]
		if byInput[x] == nil {
			inputs = append(inputs, x)
		}
		byInput[x] = append(byInput[x], n)
	}
	replaced := map[*node]*node{} // the first product: the fused node
	for _, x := range inputs {
		products := byInput[x]
		if len(products) < 2 {
			continue
		}
		replaced[products[0]] = sharedProducts(products)
		for _, p := range products {
			f.removed[p] = true
		}
	}
	return f.replace(order, replaced)
}

// productByConstant reports whether n is MatMul(x, W) or a fused
// MatMul+Add(x, W, b) (inputs in that order, fuse_bias.go) with W a
// constant float32 matrix and b a constant that a run cannot replace.
func (f *fuser) productByConstant(n *node) bool {
	switch {
	case n.op == "MatMul" && len(n.in) == 2 && len(n.out) == 1:
	case n.op == fusedMatMulAddOp && len(n.in) == 3 && len(n.out) == 1:
		if !f.fixed(n.in[2]) {
			return false
		}
	default:
		return false
	}
	w := f.g.consts[n.in[1]]
	return n.in[0] >= 0 && f.g.consts[n.in[0]] == nil && f.fixed(n.in[1]) && w.dtype == Float32 && w.rank() == 2
}

// fixed reports whether slot s holds a constant that no run replaces (an
// initializer that is not an input's default).
func (f *fuser) fixed(s int) bool {
	return s >= 0 && f.g.consts[s] != nil && !f.g.isDefault(s)
}

// sharedProduct is one product of a fused node, by the fused node's input
// indexes: its weight and bias (-1: none).
type sharedProduct struct{ w, b int }

// sharedProducts returns the fused node for products, which read the
// same x.
func sharedProducts(products []*node) *node {
	var c chainInputs
	c.arg(products[0].in[0], products[0].inName[0]) // x, input 0
	parts := make([]sharedProduct, len(products))
	var out, packs []int
	for i, p := range products {
		parts[i] = sharedProduct{w: c.arg(p.in[1], p.inName[1]), b: -1}
		if len(p.in) == 3 {
			parts[i].b = c.arg(p.in[2], p.inName[2])
		}
		out = append(out, p.out[0])
		packs = append(packs, parts[i].w)
	}
	run := func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		if outs, ok, err := runShared(rc, n, parts, in); err != nil || ok {
			return outs, err
		}
		return runOriginal(rc, products, n.in, in, out...)
	}
	first := products[0]
	return &node{
		index: first.index, name: first.name, op: sharedInputOp, opset: first.opset,
		spec: &opSpec{minIn: len(c.slots), maxIn: len(c.slots), minOut: len(out), maxOut: len(out), run: run, packs: packs},
		in:   c.slots, out: out, inName: c.names,
	}
}

// runShared computes the products of parts on x = in[0] together, into
// outputs allocated for node n, or reports false when an operand is not
// as they need (the original nodes then run). It fails only when the run
// must stop: out of budget, or the context done.
func runShared(rc *runCtx, n *node, parts []sharedProduct, in []*value) ([]*value, bool, error) {
	x := in[0]
	xd, ok := x.data.([]float32)
	if !ok || x.rank() < 2 || x.size() == 0 {
		return nil, false, nil
	}
	k := x.shape[x.rank()-1]
	var buf [4]kernels.SharedProduct // on the stack for up to four products
	products := buf[:0]
	for _, part := range parts {
		p := rc.weights[weightKey{in[part.w], false}]
		if p == nil {
			return nil, false, nil
		}
		pk, cols := p.Dims()
		if pk != k {
			return nil, false, nil
		}
		pr := kernels.SharedProduct{B: p}
		if part.b >= 0 {
			if pr.Bias, ok = rowOf(in[part.b], cols, x.rank()); !ok {
				return nil, false, nil
			}
			pr.Beta = 1
		}
		products = append(products, pr)
	}
	outs := rc.outputs(len(parts))
	for i := range products {
		shape := rc.shapeOf(x.shape)
		_, shape[len(shape)-1] = products[i].B.Dims()
		v, err := rc.allocFull(n, Float32, shape)
		if err != nil {
			return nil, false, err
		}
		outs[i], products[i].C, products[i].Ldc = v, v.data.([]float32), shape[len(shape)-1]
	}
	return outs, true, kernels.GemmPackedSharedContext(rc.ctx, false, x.size()/k, 1, xd, k, products)
}

// rowOf returns b's values when b is a float32 row of cols values, with
// possibly leading axes of size 1 up to rank axes in all: a bias that
// broadcasts over every row of a product.
func rowOf(b *value, cols, rank int) ([]float32, bool) {
	bd, ok := b.data.([]float32)
	if !ok || b.rank() < 1 || b.rank() > rank || b.shape[b.rank()-1] != cols || b.size() != cols {
		return nil, false
	}
	return bd[:cols], true
}
