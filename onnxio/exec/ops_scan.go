package exec

import (
	"cmp"
	"fmt"
	"slices"
)

// Ops that walk one axis in order: CumSum, CumProd and TopK.
func init() {
	cumAttrs := map[string]attrKind{"exclusive": attrInt, "reverse": attrInt}
	ops["CumSum"] = &opSpec{since: 11, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: cumSumOp(false), attrs: cumAttrs}
	ops["CumProd"] = &opSpec{since: 26, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: cumSumOp(true), attrs: cumAttrs}
	ops["TopK"] = &opSpec{since: 10, minIn: 2, maxIn: 2, minOut: 2, maxOut: 2, run: topKOp,
		attrs: map[string]attrKind{"axis": attrInt, "largest": attrInt, "sorted": attrInt}}
}

// cumSumOp is the kernel of CumSum (opset 11), and with product that of
// CumProd (opset 26): running sums (products) along the axis given as a
// one-element integer tensor; exclusive leaves out the element itself
// (starting from 0, or 1), reverse runs from the end. Integers wrap in
// their own type; floats accumulate in float64 and round each result
// once.
func cumSumOp(product bool) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		x, av := in[0], in[1]
		a, err := ints(rc, n, av)
		if err != nil || len(a) != 1 {
			return nil, fmt.Errorf("axis must be a one-element int32 or int64 tensor, is %s", av.describe())
		}
		axis, err := normalizeAxis(int(a[0]), x.rank())
		if err != nil {
			return nil, err
		}
		out, err := rc.alloc(n, x.dtype, x.shape)
		if err != nil {
			return nil, err
		}
		g := scanGeometry{outer: numel(x.shape[:axis]), d: x.shape[axis], inner: numel(x.shape[axis+1:]),
			exclusive: n.attrInt("exclusive", 0) == 1, reverse: n.attrInt("reverse", 0) == 1}
		switch x.dtype {
		case Float32:
			cumulate(g, x.data.([]float32), out.data.([]float32), product, func(v float32) float64 { return float64(v) }, func(a float64) float32 { return float32(a) })
		case Float64:
			cumulate(g, x.data.([]float64), out.data.([]float64), product, same[float64], same[float64])
		case Int64:
			cumulate(g, x.data.([]int64), out.data.([]int64), product, same[int64], same[int64])
		case Int32:
			cumulate(g, x.data.([]int32), out.data.([]int32), product, same[int32], same[int32])
		case Uint64:
			cumulate(g, x.data.([]uint64), out.data.([]uint64), product, same[uint64], same[uint64])
		case Uint32:
			cumulate(g, x.data.([]uint32), out.data.([]uint32), product, same[uint32], same[uint32])
		default:
			return nil, errDType(x, "float32, float64, int64, int32, uint64 or uint32")
		}
		return one(out)
	}
}

// same is the identity conversion.
func same[T any](x T) T { return x }

// scanGeometry views a tensor as (outer, d, inner) around the scanned
// axis of size d.
type scanGeometry struct {
	outer, d, inner    int
	exclusive, reverse bool
}

// each calls visit(i, first) for the positions of every line along the
// axis in scan order; first marks the start of a line.
func (g scanGeometry) each(visit func(i int, first bool)) {
	for o := range g.outer {
		for c := range g.inner {
			for j := range g.d {
				if g.reverse {
					j = g.d - 1 - j
				}
				visit((o*g.d+j)*g.inner+c, j == 0 && !g.reverse || j == g.d-1 && g.reverse)
			}
		}
	}
}

// cumulate runs the sum or product along each line in the accumulator
// type A (float64 for floats, the type itself for integers).
func cumulate[T, A number](g scanGeometry, xs, o []T, product bool, widen func(T) A, narrow func(A) T) {
	var acc A
	g.each(func(i int, first bool) {
		if first {
			acc = 0
			if product {
				acc = 1
			}
		}
		prev := acc
		if product {
			acc *= widen(xs[i])
		} else {
			acc += widen(xs[i])
		}
		if g.exclusive {
			o[i] = narrow(prev)
		} else {
			o[i] = narrow(acc)
		}
	})
}

// topKOp is the kernel of TopK (K an input from opset 10; largest and
// sorted from 11): the K largest (or smallest) elements along axis
// (default -1) and their int64 indices, in sorted order. Equal values keep
// the lower index first; NaN sorts above every number, as in numpy.
func topKOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, kv := in[0], in[1]
	ks, err := ints(rc, n, kv)
	if err != nil || len(ks) != 1 {
		return nil, fmt.Errorf("input K must be a one-element int64 tensor, is %s", kv.describe())
	}
	if !x.dtype.isNumeric() {
		return nil, errDType(x, "a numeric type")
	}
	axis, err := normalizeAxis(int(n.attrInt("axis", -1)), x.rank())
	if err != nil {
		return nil, err
	}
	d := x.shape[axis]
	if ks[0] < 0 || ks[0] > int64(d) {
		return nil, fmt.Errorf("k %d is out of range for axis %d of size %d", ks[0], axis, d)
	}
	k := int(ks[0])
	largest := n.attrInt("largest", 1) == 1
	shape := slices.Clone(x.shape)
	shape[axis] = k
	values, err := rc.alloc(n, x.dtype, shape)
	if err != nil {
		return nil, err
	}
	indices, err := rc.alloc(n, Int64, shape)
	if err != nil {
		return nil, err
	}
	var less func(i, j int) int // orders positions along one line, best first
	switch x.dtype {
	case Int64:
		less = orderBy(x.data.([]int64), largest)
	case Uint64:
		less = orderBy(x.data.([]uint64), largest)
	default:
		less = orderBy(castTo[float64](x.data), largest)
	}
	outer, inner := numel(x.shape[:axis]), numel(x.shape[axis+1:])
	idx := indices.data.([]int64)
	from := make([]int, len(idx))
	line := make([]int, d)
	for o := range outer {
		for c := range inner {
			for j := range line {
				line[j] = (o*d+j)*inner + c
			}
			slices.SortStableFunc(line, less)
			for j := range k {
				at := (o*k+j)*inner + c
				from[at] = line[j]
				idx[at] = int64((line[j] - c) / inner % d)
			}
		}
	}
	take(values, x, from)
	return []*value{values, indices}, nil
}

// orderBy compares two element offsets for TopK: the larger (or smaller)
// value first, NaN as the largest; ties compare equal, so a stable sort
// keeps the lower index first.
func orderBy[T number](xs []T, largest bool) func(i, j int) int {
	return func(i, j int) int {
		a, b := xs[i], xs[j]
		c := cmpNaNLast(a, b)
		if largest {
			return -c
		}
		return c
	}
}

// cmpNaNLast orders numbers ascending with NaN above everything.
func cmpNaNLast[T number](a, b T) int {
	an, bn := a != a, b != b
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b)
}
