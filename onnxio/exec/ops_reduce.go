package exec

import (
	"math"
	"slices"
)

// reduction names a Reduce op.
type reduction int

const (
	opReduceSum reduction = iota
	opReduceMean
	opReduceMax
	opReduceL2
)

// reduceOp is the kernel of ReduceSum, ReduceMean, ReduceMax and ReduceL2. Axes are
// an attribute before opset axesInputSince (13 for ReduceSum, 18 for the
// others) and an optional input from it. No axes (or an empty list) means
// all axes, unless noop_with_empty_axes makes it the identity; keepdims
// (default 1) keeps reduced axes with size 1.
func reduceOp(kind reduction, axesInputSince int) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		x := in[0]
		axes, _, err := axesOf(rc, n, in, axesInputSince)
		if err != nil {
			return nil, err
		}
		reduced := make([]bool, x.rank())
		if len(axes) == 0 {
			if n.attrInt("noop_with_empty_axes", 0) == 1 {
				return one(x)
			}
			for i := range reduced {
				reduced[i] = true
			}
		} else {
			pos, err := normalizeAxes(axes, x.rank())
			if err != nil {
				return nil, err
			}
			for _, p := range pos {
				reduced[p] = true
			}
		}
		out, err := reduce(rc, n, kind, x, reduced)
		if err != nil {
			return nil, err
		}
		if n.attrInt("keepdims", 1) == 0 {
			shape := []int{}
			for i, d := range out.shape {
				if !reduced[i] {
					shape = append(shape, d)
				}
			}
			out = out.withShape(shape)
		}
		return one(out)
	}
}

// reduce dispatches a reduction over the marked axes on x's type; the
// result, allocated for node n, keeps the reduced axes with size 1.
func reduce(rc *runCtx, n *node, kind reduction, x *value, reduced []bool) (*value, error) {
	if kind == opReduceL2 && x.dtype != Float32 && x.dtype != Float64 {
		return nil, errDType(x, "float32 or float64")
	}
	switch x.dtype {
	case Float32:
		return reduceFloat[float32](rc, n, kind, x, reduced)
	case Float64:
		return reduceFloat[float64](rc, n, kind, x, reduced)
	}
	k, ok := intKinds[x.dtype]
	if !ok {
		return nil, errDType(x, "a numeric type")
	}
	return k.reduce(rc, n, kind, x, reduced)
}

// reduceFloat accumulates in float64 (the sum of many float32 terms is
// then as accurate as numpy's pairwise float32 sum, or better) and rounds
// once. Max propagates NaN; the max of no elements is -Inf. L2 is the
// square root of the sum of squares (F.normalize's norm in PyTorch exports).
func reduceFloat[T float](rc *runCtx, n *node, kind reduction, x *value, reduced []bool) (*value, error) {
	init := 0.0
	step := func(acc float64, v T) float64 { return acc + float64(v) }
	switch kind {
	case opReduceMax:
		init = math.Inf(-1)
		step = func(acc float64, v T) float64 { return max(acc, float64(v)) }
	case opReduceL2:
		step = func(acc float64, v T) float64 { return acc + float64(v)*float64(v) }
	}
	shape, count := keptShape(x.shape, reduced)
	acc, err := scratch[float64](rc, n, numel(shape), "float64 accumulators")
	if err != nil {
		return nil, err
	}
	res, err := rc.alloc(n, x.dtype, shape)
	if err != nil {
		return nil, err
	}
	accumulate(x, reduced, shape, acc, init, step)
	out := res.data.([]T)
	for i, a := range acc {
		switch kind {
		case opReduceMean:
			a /= float64(count)
		case opReduceL2:
			a = math.Sqrt(a)
		}
		out[i] = T(a)
	}
	return res, nil
}

// reduce reduces integers of type T in the type itself (wrapping as C
// and numpy's fixed-width sums do); the max of no elements is the type's
// minimum. The mean truncates toward zero.
func (k intOf[T]) reduce(rc *runCtx, n *node, kind reduction, x *value, reduced []bool) (*value, error) {
	init := T(0)
	step := func(acc, v T) T { return acc + v }
	if kind == opReduceMax {
		init = k.lowest
		step = func(acc, v T) T { return max(acc, v) }
	}
	shape, count := keptShape(x.shape, reduced)
	res, err := rc.alloc(n, x.dtype, shape)
	if err != nil {
		return nil, err
	}
	acc := res.data.([]T)
	accumulate(x, reduced, shape, acc, init, step)
	if kind == opReduceMean && count > 0 {
		for i := range acc {
			acc[i] /= T(count)
		}
	}
	return res, nil
}

// keptShape returns the shape of a reduction's result with the reduced
// axes kept with size 1, and the number of elements reduced into each
// result element.
func keptShape(shape []int, reduced []bool) ([]int, int) {
	kept := slices.Clone(shape)
	count := 1
	for i, r := range reduced {
		if r {
			count *= kept[i]
			kept[i] = 1
		}
	}
	return kept, count
}

// accumulate folds step over the elements of x into acc, one accumulator
// per position of shape, x's shape with the reduced axes kept with size 1.
func accumulate[T number, A number](x *value, reduced []bool, shape []int, acc []A, init A, step func(A, T) A) {
	for i := range acc {
		acc[i] = init
	}
	outStrides := stridesOf(shape)
	for i, r := range reduced {
		if r {
			outStrides[i] = 0
		}
	}
	xs := x.data.([]T)
	walk(x.shape, [][]int{stridesOf(x.shape), outStrides}, func(off []int, n int, st []int) {
		ix, io := off[0], off[1]
		for range n {
			acc[io] = step(acc[io], xs[ix])
			ix += st[0]
			io += st[1]
		}
	})
}
