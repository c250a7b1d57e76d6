package exec

import (
	"fmt"
	"slices"

	"github.com/attnrun/attnrun/internal/kernels"
)

// matmulOp is the kernel of MatMul, with numpy's matmul semantics: the
// last two axes multiply, leading (batch) axes broadcast, and a 1-D
// operand is a row (left) or column (right) vector whose axis is dropped
// from the result. float32 goes through kernels.Gemm.
func matmulOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	a, b := in[0], in[1]
	if out, ok, err := matmulLinear(rc, n, a, b); ok || err != nil {
		if err != nil {
			return nil, err
		}
		return rc.one(out)
	}
	if err := sameDType(in); err != nil {
		return nil, err
	}
	if !a.dtype.isNumeric() {
		return nil, errDType(a, "a numeric type")
	}
	if a.rank() == 0 || b.rank() == 0 {
		return nil, fmt.Errorf("operands must have rank >= 1, got %s and %s", shapeString(a.shape), shapeString(b.shape))
	}
	as, bs := a.shape, b.shape
	if len(as) == 1 {
		as = []int{1, as[0]}
	}
	if len(bs) == 1 {
		bs = []int{bs[0], 1}
	}
	ra, rb := len(as), len(bs)
	m, k, cols := as[ra-2], as[ra-1], bs[rb-1]
	if bs[rb-2] != k {
		return nil, fmt.Errorf("shapes %s and %s cannot be multiplied (%d != %d)", shapeString(a.shape), shapeString(b.shape), k, bs[rb-2])
	}
	batch, err := broadcastShapes(as[:ra-2], bs[:rb-2])
	if err != nil {
		return nil, fmt.Errorf("batch dimensions: %w", err)
	}
	shape := slices.Concat(batch, []int{m, cols})
	out, err := rc.alloc(n, a.dtype, shape)
	if err != nil {
		return nil, err
	}
	mm := matmul{
		m: m, n: cols, k: k, batch: batch,
		aStrides: scaled(broadcastStrides(as[:ra-2], batch), m*k),
		bStrides: scaled(broadcastStrides(bs[:rb-2], batch), k*cols),
	}
	switch {
	case out.size() == 0 || k == 0: // nothing to add up: zeros
	case a.dtype == Float32:
		err = mm.float32(rc, a.data.([]float32), b, out.data.([]float32))
	case numKinds[a.dtype] != nil:
		err = numKinds[a.dtype].matmul(rc, mm, a.data, b.data, out.data)
	}
	if err != nil {
		return nil, err
	}
	// Drop the axes a vector operand was given.
	switch {
	case len(a.shape) == 1 && len(b.shape) == 1:
		shape = batch
	case len(a.shape) == 1:
		shape = slices.Concat(batch, []int{cols})
	case len(b.shape) == 1:
		shape = slices.Concat(batch, []int{m})
	}
	return one(out.withShape(shape))
}

// matmulLinear is MatMul's float32 product of an x of rank ≥ 2 by a
// matrix, a linear layer's shape, with nothing to broadcast: one product
// of all rows of x (on the packed weight when W is one), as the general
// path computes it, without its bookkeeping. ok is false for other
// operands, which the general path takes (and reports).
func matmulLinear(rc *runCtx, n *node, x, w *value) (out *value, ok bool, err error) {
	if x.dtype != Float32 || w.dtype != Float32 || x.rank() < 2 || w.rank() != 2 || x.shape[x.rank()-1] != w.shape[0] {
		return nil, false, nil
	}
	k, cols := w.shape[0], w.shape[1]
	shape := rc.shapeOf(x.shape)
	shape[len(shape)-1] = cols
	// The product writes every element (beta 0), so a planned buffer need
	// not be zeroed first, except for an empty sum (k = 0), which is 0.
	if out, err = rc.allocFull(n, Float32, shape); err != nil || out.size() == 0 {
		return out, true, err
	}
	if k == 0 {
		clear(out.data.([]float32))
		return out, true, nil
	}
	return out, true, rc.product(false, false, x.size()/k, cols, k, 1, x.data.([]float32), k, w, cols, 0, out.data.([]float32), cols)
}

// scaled multiplies strides counted in matrices into strides in elements.
func scaled(strides []int, f int) []int {
	for i := range strides {
		strides[i] *= f
	}
	return strides
}

// matmul is a batch of m×k by k×n products; a and b step through their
// data by their (broadcast) batch strides, the output is dense.
type matmul struct {
	m, n, k            int
	batch              []int
	aStrides, bStrides []int
}

// each calls f with the offsets of every batch's operands and output,
// until f returns an error.
func (mm matmul) each(f func(ia, ib, ic int) error) error {
	var err error
	walk(mm.batch, [][]int{mm.aStrides, mm.bStrides, scaled(stridesOf(mm.batch), mm.m*mm.n)},
		func(off []int, n int, step []int) {
			ia, ib, ic := off[0], off[1], off[2]
			for range n {
				if err != nil {
					return
				}
				err = f(ia, ib, ic)
				ia += step[0]
				ib += step[1]
				ic += step[2]
			}
		})
	return err
}

// float32 runs the batch on kernels.Gemm. When every batch shares one b
// (x·W with x of shape (B, T, d)), a's batches are necessarily contiguous
// and the whole batch is one (B·T)×k by k×n product; otherwise each run of
// batches with uniform strides (all of them, for (B, H) heads) is one
// GemmStrided call.
// The products stop early, with rc's error, when the run's context is
// done.
func (mm matmul) float32(rc *runCtx, a []float32, bv *value, c []float32) error {
	shared := true
	for i, d := range mm.batch {
		shared = shared && (mm.bStrides[i] == 0 || d == 1)
	}
	if shared {
		return rc.product(false, false, numel(mm.batch)*mm.m, mm.n, mm.k, 1, a, mm.k, bv, mm.n, 0, c, mm.n)
	}
	b := bv.data.([]float32)
	cStrides := scaled(stridesOf(mm.batch), mm.m*mm.n)
	var err error
	walk(mm.batch, [][]int{mm.aStrides, mm.bStrides, cStrides}, func(off []int, n int, step []int) {
		if err == nil {
			err = kernels.GemmStridedContext(rc.ctx, n, false, false, mm.m, mm.n, mm.k, 1,
				a[off[0]:], mm.k, step[0], b[off[1]:], mm.n, step[1], 0, c[off[2]:], mm.n, step[2])
		}
	})
	return err
}

// matmul is matmulT for type T.
func (numOf[T]) matmul(rc *runCtx, mm matmul, a, b, c any) error {
	return matmulT(rc, mm, a.([]T), b.([]T), c.([]T))
}

// matmulT is the plain triple loop for the other numeric types. It checks
// the run's context once per output row.
func matmulT[T number](rc *runCtx, mm matmul, a, b, c []T) error {
	return mm.each(func(ia, ib, ic int) error {
		for i := range mm.m {
			if err := rc.err(); err != nil {
				return err
			}
			row := c[ic+i*mm.n : ic+(i+1)*mm.n]
			for p := range mm.k {
				x := a[ia+i*mm.k+p]
				brow := b[ib+p*mm.n : ib+(p+1)*mm.n]
				for j, y := range brow {
					row[j] += x * y
				}
			}
		}
		return nil
	})
}

// gemmOp is the kernel of Gemm: Y = alpha·op(A)·op(B) + beta·C for 2-D A
// and B (op transposes when transA/transB is 1), with the optional C
// broadcast one way to the M×N result.
func gemmOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	a, b, c := in[0], in[1], input(in, 2)
	if err := sameDType(in); err != nil {
		return nil, err
	}
	if !a.dtype.isNumeric() {
		return nil, errDType(a, "a numeric type")
	}
	if a.rank() != 2 || b.rank() != 2 {
		return nil, fmt.Errorf("inputs A and B must be 2-D, got %s and %s", shapeString(a.shape), shapeString(b.shape))
	}
	transA, transB := n.attrInt("transA", 0) != 0, n.attrInt("transB", 0) != 0
	alpha, beta := n.attrFloat("alpha", 1), n.attrFloat("beta", 1)
	m, k := a.shape[0], a.shape[1]
	if transA {
		m, k = k, m
	}
	kb, cols := b.shape[0], b.shape[1]
	if transB {
		kb, cols = cols, kb
	}
	if k != kb {
		return nil, fmt.Errorf("op(A) is %d×%d and op(B) is %d×%d: inner dimensions differ", m, k, kb, cols)
	}
	shape := []int{m, cols}
	var out *value
	var err error
	if c != nil {
		if bc, err := broadcastShapes(c.shape, shape); err != nil || !equalShapes(bc, shape) {
			return nil, fmt.Errorf("input C of shape %s does not broadcast to the %s result", shapeString(c.shape), shapeString(shape))
		}
		if a.dtype == Float32 && c.rank() > 0 && c.shape[c.rank()-1] == cols && c.size() == cols && cols > 0 {
			// A bias row (nn.Linear exported as Gemm; not a column of
			// m values, even when m = cols): the product starts each
			// tile from it.
			if out, err = rc.allocFull(n, Float32, shape); err != nil {
				return nil, err
			}
			err := rc.productBias(transA, transB, m, cols, k, alpha, a.data.([]float32), a.shape[1],
				b, b.shape[1], beta, c.data.([]float32), out.data.([]float32), cols)
			return oneOrErr(out, err)
		}
		out, err = gather(rc, n, c, view{strides: broadcastStrides(c.shape, shape)}, shape)
	} else {
		out, err = rc.alloc(n, a.dtype, shape)
		beta = 0
	}
	if err != nil {
		return nil, err
	}
	if a.dtype == Float32 {
		err := rc.product(transA, transB, m, cols, k, alpha, a.data.([]float32), a.shape[1],
			b, b.shape[1], beta, out.data.([]float32), cols)
		return oneOrErr(out, err)
	}
	// Other types: compute op(A)·op(B) with MatMul's loop, then combine.
	at, bt := a, b
	if transA {
		if at, err = gather(rc, n, a, view{strides: []int{1, a.shape[1]}}, []int{m, k}); err != nil {
			return nil, err
		}
	}
	if transB {
		if bt, err = gather(rc, n, b, view{strides: []int{1, b.shape[1]}}, []int{k, cols}); err != nil {
			return nil, err
		}
	}
	prod, err := matmulOp(rc, n, []*value{at, bt})
	if err != nil {
		return nil, err
	}
	return oneOrErr(gemmCombine(rc, n, prod[0], out, float64(alpha), float64(beta)))
}

// gemmCombine returns alpha·ab + beta·c for non-float32 types, computed in
// float64 and converted back (exact for the integer sizes Gemm meets).
func gemmCombine(rc *runCtx, n *node, ab, c *value, alpha, beta float64) (*value, error) {
	x, err := cast(rc, n, ab, Float64)
	if err != nil {
		return nil, err
	}
	y, err := cast(rc, n, c, Float64)
	if err != nil {
		return nil, err
	}
	xs, ys := x.data.([]float64), y.data.([]float64)
	sum, err := rc.alloc(n, Float64, ab.shape)
	if err != nil {
		return nil, err
	}
	for i, s := 0, sum.data.([]float64); i < len(s); i++ {
		s[i] = alpha*xs[i] + beta*ys[i]
	}
	return cast(rc, n, sum, ab.dtype)
}
