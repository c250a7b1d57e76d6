package exec

import (
	"fmt"
	"math"
)

func init() {
	ops["Det"] = unarySpec(11, detOp)
}

// detOp is the kernel of Det: the determinant of each M×M matrix in the
// last two axes, by Gaussian elimination with partial pivoting in
// float64.
func detOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if !x.dtype.IsFloat() {
		return nil, errDType(x, "float32 or float64")
	}
	r := x.rank()
	if r < 2 || x.shape[r-1] != x.shape[r-2] {
		return nil, fmt.Errorf("input of shape %s is not a batch of square matrices", shapeString(x.shape))
	}
	m := x.shape[r-1]
	out, err := rc.alloc(n, x.dtype, x.shape[:r-2])
	if err != nil {
		return nil, err
	}
	xs := castTo[float64](x.data)
	dets := make([]float64, out.size())
	for b := range dets {
		dets[b] = determinant(xs[b*m*m:(b+1)*m*m], m)
	}
	return one(fill(out, dets))
}

// determinant reduces a (row-major, scratch) m×m matrix to upper
// triangular form and returns the product of the pivots, negated once per
// row swap.
func determinant(a []float64, m int) float64 {
	det := 1.0
	for c := range m {
		p := c
		for r := c + 1; r < m; r++ {
			if math.Abs(a[r*m+c]) > math.Abs(a[p*m+c]) {
				p = r
			}
		}
		if a[p*m+c] == 0 {
			return 0
		}
		if p != c {
			for k := range m {
				a[c*m+k], a[p*m+k] = a[p*m+k], a[c*m+k]
			}
			det = -det
		}
		det *= a[c*m+c]
		for r := c + 1; r < m; r++ {
			f := a[r*m+c] / a[c*m+c]
			for k := c; k < m; k++ {
				a[r*m+k] -= f * a[c*m+k]
			}
		}
	}
	return det
}
