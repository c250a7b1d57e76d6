package exec

import (
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// Bias fusion. A linear layer exports as Add(MatMul(x, W), b) (or
// Add(b, MatMul(x, W))): the product is written, then read again and
// copied with the bias added. The fused node starts each tile of the
// output from the bias and lets the GEMM add the product to it (beta = 1,
// kernels.GemmPackedBias), which saves two passes over the output and
// its allocation. The fused node checks on every run that W is a float32
// matrix and b a vector of its columns (possibly with leading axes of
// size 1), and runs the two original nodes otherwise.

func init() {
	registerFusion(fusion{name: "bias", order: 20, run: fuseBias})
}

// fuseBias rewrites every MatMul+Add pair of order that no earlier fusion
// took into a fused node.
func fuseBias(f *fuser, order []*node) []*node {
	replaced := map[*node]*node{} // the Add: the fused node
	for _, n := range order {
		if n.op == "MatMul" && !f.removed[n] {
			if fused, last := f.matchBias(n); fused != nil {
				replaced[last] = fused
			}
		}
	}
	return f.replace(order, replaced)
}

// fusedMatMulAddOp is the op name of fused MatMul+Add nodes.
const fusedMatMulAddOp = "FusedMatMulAdd"

// matchBias tries to read mm as the product of a MatMul+Add pair. It
// returns the fused node and the Add it replaces, or nils.
func (f *fuser) matchBias(mm *node) (*node, *node) {
	if len(mm.in) != 2 || len(mm.out) != 1 {
		return nil, nil
	}
	add := f.reader(mm.out[0])
	if add == nil || len(add.out) != 1 || f.removed[add] {
		return nil, nil
	}
	_, k, ok := match.BiasAdd[*node, int](fuserView{f}, add, func(p *node, bias int) bool { return p == mm && add.in[bias] >= 0 })
	if !ok {
		return nil, nil
	}
	var c chainInputs
	x, w, b := c.arg(mm.in[0], mm.inName[0]), c.arg(mm.in[1], mm.inName[1]), c.arg(add.in[k], add.inName[k])
	original := []*node{mm, add}
	f.removed[mm], f.removed[add] = true, true
	run := func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		if out, ok, err := matmulAdd(rc, n, in[x], in[w], in[b]); err != nil || ok {
			if err != nil {
				return nil, err
			}
			return rc.one(out)
		}
		return runOriginal(rc, original, n.in, in, add.out[0])
	}
	fused := &node{
		index: add.index, name: add.name, op: fusedMatMulAddOp, opset: add.opset,
		spec: &opSpec{minIn: len(c.slots), maxIn: len(c.slots), minOut: 1, maxOut: 1, run: run, packs: []int{w}},
		in:   c.slots, out: []int{add.out[0]}, inName: c.names,
	}
	return fused, add
}

// matmulAdd computes x·w + b for float32 x of rank ≥ 2, a matrix w and a
// bias b of w's columns into a value allocated for node n, or reports
// false when the operands are not so. It fails only when the run must
// stop: out of budget, or the context done.
func matmulAdd(rc *runCtx, n *node, x, w, b *value) (*value, bool, error) {
	xd, ok1 := x.data.([]float32)
	_, ok2 := w.data.([]float32)
	if !ok1 || !ok2 || x.rank() < 2 || w.rank() != 2 {
		return nil, false, nil
	}
	k, cols := w.shape[0], w.shape[1]
	bias, ok := rowOf(b, cols, x.rank())
	if !ok || x.shape[x.rank()-1] != k || k == 0 || cols == 0 {
		return nil, false, nil
	}
	rows := x.size() / k
	if rows == 0 {
		return nil, false, nil
	}
	res, err := rc.allocFull(n, Float32, slices.Concat(x.shape[:x.rank()-1], []int{cols}))
	if err != nil {
		return nil, false, err
	}
	if err := rc.productBias(false, false, rows, cols, k, 1, xd, k, w, cols, 1, bias, res.data.([]float32), cols); err != nil {
		return nil, false, err
	}
	return res, true, nil
}
