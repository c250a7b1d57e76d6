package exec

// Residual LayerNormalization fusion. A transformer block ends its
// attention and its MLP with LayerNormalization(Add(x, residual)): the sum
// is written in full, then read again three times by the normalization.
// The fused node adds each row into the output and normalizes it there
// (kernels.LayerNorm32), the sum rounded to float32 as the Add node rounds
// it, so it gives the two nodes' values. The structure is checked in New
// (the sum read by the normalization alone, which has one output); that
// the operands are float32 and the Add needs no broadcasting is checked on
// every run, the original nodes running otherwise.

func init() {
	registerFusion(fusion{name: "residual layernorm", order: 22, run: fuseResidualNorm})
}

// fusedAddLayerNormOp is the op name of fused Add+LayerNormalization nodes.
const fusedAddLayerNormOp = "FusedAddLayerNorm"

// fuseResidualNorm rewrites every Add+LayerNormalization pair of order
// that no earlier fusion took into a fused node.
func fuseResidualNorm(f *fuser, order []*node) []*node {
	replaced := map[*node]*node{}
	for _, n := range order {
		if n.op == "LayerNormalization" && !f.removed[n] {
			if fused := f.matchResidualNorm(n); fused != nil {
				replaced[n] = fused
			}
		}
	}
	return f.replace(order, replaced)
}

// matchResidualNorm tries to read ln as the normalization of an Add; it
// returns the fused node, or nil.
func (f *fuser) matchResidualNorm(ln *node) *node {
	if len(ln.out) != 1 || ln.out[0] < 0 || len(ln.in) < 2 || slicesHas(ln.in, -1) || !f.private(ln.in[0]) {
		return nil
	}
	add := f.producer(ln.in[0])
	if add == nil || add.op != "Add" || f.removed[add] || len(add.in) != 2 || len(add.out) != 1 || slicesHas(add.in, -1) {
		return nil
	}
	var c chainInputs
	a, b := c.arg(add.in[0], add.inName[0]), c.arg(add.in[1], add.inName[1])
	scale, bias := c.arg(ln.in[1], ln.inName[1]), -1
	if len(ln.in) > 2 {
		bias = c.arg(ln.in[2], ln.inName[2])
	}
	original := []*node{add, ln}
	f.removed[add], f.removed[ln] = true, true
	run := func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		var bv *value
		if bias >= 0 {
			bv = in[bias]
		}
		y, ok, err := layerNorm32(rc, ln, in[a], in[b], in[scale], bv)
		if !ok {
			return runOriginal(rc, original, n.in, in, ln.out[0])
		}
		if err != nil {
			return nil, err
		}
		return rc.one(y)
	}
	return &node{
		index: ln.index, name: ln.name, op: fusedAddLayerNormOp, opset: ln.opset, attrs: ln.attrs,
		spec: &opSpec{minIn: len(c.slots), maxIn: len(c.slots), minOut: 1, maxOut: 1, run: run},
		in:   c.slots, out: []int{ln.out[0]}, inName: c.names,
	}
}
