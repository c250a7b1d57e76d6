package exec

import (
	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/kernels"
)

// Packed weights. A product's right operand that is a constant — the
// weight of a linear layer, exported as MatMul(x, W), Gemm(x, W, b) or
// fused MatMul+Add — is packed once, when the graph is prepared, into the
// blocks the GEMM kernels read (kernels.PackB), instead of on every run.
// For short inputs (one token, a short sentence) packing the weight is
// most of a product's work. The packed copies count against the graph's
// memory budget beside the initializers; a weight that does not fit is
// left unpacked, which costs time, not correctness.

// weightKey names a packed operand: a constant value and whether the
// product reads it transposed.
type weightKey struct {
	v     *value
	trans bool
}

// packWeights packs the constant float32 matrices that the graph's
// MatMul, Gemm and fused nodes multiply by on the right.
func (b *builder) packWeights() {
	for _, n := range b.g.nodes {
		inputs, trans := packedInputs(n)
		for _, i := range inputs {
			if i < len(n.in) && n.in[i] >= 0 {
				b.pack(n.in[i], trans)
			}
		}
	}
}

// secondInput is the right operand of MatMul and Gemm.
var secondInput = []int{1}

// packedInputs returns the inputs of n that its products multiply by on
// the right, and whether they read them transposed: MatMul's and Gemm's
// second, a fused node's spec.packs.
func packedInputs(n *node) ([]int, bool) {
	switch n.op {
	case "MatMul":
		return secondInput, false
	case "Gemm":
		return secondInput, n.attrInt("transB", 0) != 0
	}
	return n.spec.packs, false
}

// pack packs the value of slot s, read transposed or not, unless it is
// no constant float32 matrix, a default a run may replace, packed
// already, or over the memory budget.
func (b *builder) pack(s int, trans bool) {
	v := b.g.consts[s]
	key := weightKey{v, trans}
	if v == nil || b.g.isDefault(s) || b.g.weights[key] != nil || v.dtype != Float32 || v.rank() != 2 || v.size() == 0 {
		return
	}
	if b.budget.Reserve(budget.Bytes(int64(v.size()), 4), "packed weight") != nil {
		return
	}
	rows, cols := v.shape[0], v.shape[1]
	k, cols2 := rows, cols
	if trans {
		k, cols2 = cols, rows
	}
	if b.g.weights == nil {
		b.g.weights = map[weightKey]*kernels.PackedB{}
	}
	b.g.weights[key] = kernels.PackB(trans, k, cols2, v.data.([]float32), cols)
}

// isDefault reports whether slot s is an input's default value, which a
// run may replace.
func (g *Graph) isDefault(s int) bool {
	for _, d := range g.defaults {
		if d == s {
			return true
		}
	}
	return false
}

// productBias computes C = alpha·op(A)·op(B) + beta·bias, the row bias
// (n values) added to every row of C, for float32 operands as product
// takes them: on the packed copy of w the kernels read the bias in place
// of C (kernels.GemmPackedBiasContext), else C is filled with the bias
// first. Both give the same bits.
func (rc *runCtx) productBias(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, w *value, ldb int, beta float32, bias, c []float32, ldc int) error {
	if p := rc.weights[weightKey{w, transB}]; p != nil {
		if pk, pn := p.Dims(); pk == k && pn == n {
			return kernels.GemmPackedBiasContext(rc.ctx, transA, m, alpha, a, lda, p, beta, bias, c, ldc)
		}
	}
	kernels.FillRows(c, ldc, m, bias[:n])
	return kernels.GemmContext(rc.ctx, transA, transB, m, n, k, alpha, a, lda, w.data.([]float32), ldb, beta, c, ldc)
}

// product computes C = alpha·op(A)·op(B) + beta·C for float32 operands,
// op(A) m×k and op(B) k×n, where B is the value w (row stride ldb): on
// the packed copy when the graph packed w for this transpose, else with
// kernels.GemmContext. Both give the same bits.
func (rc *runCtx) product(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, w *value, ldb int, beta float32, c []float32, ldc int) error {
	if p := rc.weights[weightKey{w, transB}]; p != nil {
		if pk, pn := p.Dims(); pk == k && pn == n {
			return kernels.GemmPackedContext(rc.ctx, transA, m, alpha, a, lda, p, beta, c, ldc)
		}
	}
	return kernels.GemmContext(rc.ctx, transA, transB, m, n, k, alpha, a, lda, w.data.([]float32), ldb, beta, c, ldc)
}
