package exec

import (
	"fmt"
	"math"
	"slices"
)

// The Reduce ops beyond ops_reduce.go's, and ArgMax/ArgMin. Axes are an
// attribute before opset 18 and an optional input from 18, keepdims and
// noop_with_empty_axes as in reduceOp; ReduceMin-20 only added bool.
func init() {
	for name, kind := range map[string]reduceKind{
		"ReduceMin": reduceMin, "ReduceProd": reduceProd, "ReduceL1": reduceL1,
		"ReduceSumSquare": reduceSumSquare, "ReduceLogSum": reduceLogSum, "ReduceLogSumExp": reduceLogSumExp,
	} {
		ops[name] = &opSpec{since: 1, minIn: 1, maxIn: 2, minOut: 1, maxOut: 1, run: reduceMoreOp(kind),
			attrs:        map[string]attrKind{"axes": attrInts, "keepdims": attrInt, "noop_with_empty_axes": attrInt},
			movedToInput: map[string]int{"axes": 18}}
	}
	argAttrs := map[string]attrKind{"axis": attrInt, "keepdims": attrInt, "select_last_index": attrInt}
	ops["ArgMax"] = &opSpec{since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, attrs: argAttrs, run: argOp(true)}
	ops["ArgMin"] = &opSpec{since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, attrs: argAttrs, run: argOp(false)}
}

// reduceKind names one of the reductions of this file.
type reduceKind int

const (
	reduceMin reduceKind = iota
	reduceProd
	reduceL1
	reduceSumSquare
	reduceLogSum
	reduceLogSumExp
)

// reduceMoreOp is the kernel of the reductions of this file.
func reduceMoreOp(kind reduceKind) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		x := in[0]
		axes, _, err := axesOf(rc, n, in, 18)
		if err != nil {
			return nil, err
		}
		if len(axes) == 0 && n.attrInt("noop_with_empty_axes", 0) == 1 {
			return one(x)
		}
		reduced, err := reducedAxes(axes, x.rank())
		if err != nil {
			return nil, err
		}
		kept, _ := keptShape(x.shape, reduced)
		out, err := rc.alloc(n, x.dtype, kept)
		if err != nil {
			return nil, err
		}
		if err := reduceInto(kind, x, reduced, out); err != nil {
			return nil, err
		}
		if n.attrInt("keepdims", 1) == 0 {
			out = out.withShape(droppedShape(x.shape, reduced))
		}
		return one(out)
	}
}

// reducedAxes marks the reduced axes: the given ones, or all when none are.
func reducedAxes(axes []int64, rank int) ([]bool, error) {
	reduced := make([]bool, rank)
	if len(axes) == 0 {
		for i := range reduced {
			reduced[i] = true
		}
		return reduced, nil
	}
	pos, err := normalizeAxes(axes, rank)
	if err != nil {
		return nil, err
	}
	for _, p := range pos {
		reduced[p] = true
	}
	return reduced, nil
}

// droppedShape is shape without the reduced axes.
func droppedShape(shape []int, reduced []bool) []int {
	out := []int{}
	for i, d := range shape {
		if !reduced[i] {
			out = append(out, d)
		}
	}
	return out
}

// eachReduced calls visit for every element of an array of shape with the
// element's index ix and the index io of its accumulator in the kept-dims
// result.
func eachReduced(shape []int, reduced []bool, visit func(ix, io int)) {
	kept, _ := keptShape(shape, reduced)
	outStrides := stridesOf(kept)
	for i, r := range reduced {
		if r {
			outStrides[i] = 0
		}
	}
	walk(shape, [][]int{stridesOf(shape), outStrides}, func(off []int, cnt int, st []int) {
		ix, io := off[0], off[1]
		for range cnt {
			visit(ix, io)
			ix += st[0]
			io += st[1]
		}
	})
}

// reduceInto computes the reduction of x over the marked axes into out
// (kept-dims shape, zero-filled).
func reduceInto(kind reduceKind, x *value, reduced []bool, out *value) error {
	switch x.dtype {
	case Float32:
		reduceFloatInto(kind, x.data.([]float32), x.shape, reduced, out.data.([]float32))
	case Float64:
		reduceFloatInto(kind, x.data.([]float64), x.shape, reduced, out.data.([]float64))
	case Int64, Int32, Int8, Uint64, Uint32, Uint8:
		return intKinds[x.dtype].reduceInto(kind, x, reduced, out.data)
	case Bool:
		if kind != reduceMin {
			return errDType(x, "a numeric type")
		}
		o, xs := out.data.([]bool), x.data.([]bool)
		for i := range o {
			o[i] = true
		}
		eachReduced(x.shape, reduced, func(ix, io int) { o[io] = o[io] && xs[ix] })
	default:
		return errDType(x, "float32, float64, int64, int32, int8, uint64, uint32 or uint8")
	}
	return nil
}

// reduceFloatInto reduces in float64 and rounds once. Min propagates NaN
// and is +Inf over no elements; LogSumExp subtracts each group's maximum
// first, so that large inputs do not overflow.
func reduceFloatInto[T float](kind reduceKind, xs []T, shape []int, reduced []bool, o []T) {
	acc := make([]float64, len(o))
	switch kind {
	case reduceMin:
		for i := range acc {
			acc[i] = math.Inf(1)
		}
		eachReduced(shape, reduced, func(ix, io int) { acc[io] = min(acc[io], float64(xs[ix])) })
	case reduceProd:
		for i := range acc {
			acc[i] = 1
		}
		eachReduced(shape, reduced, func(ix, io int) { acc[io] *= float64(xs[ix]) })
	case reduceL1:
		eachReduced(shape, reduced, func(ix, io int) { acc[io] += math.Abs(float64(xs[ix])) })
	case reduceSumSquare:
		eachReduced(shape, reduced, func(ix, io int) { acc[io] += float64(xs[ix]) * float64(xs[ix]) })
	case reduceLogSum:
		eachReduced(shape, reduced, func(ix, io int) { acc[io] += float64(xs[ix]) })
		for i, a := range acc {
			acc[i] = math.Log(a)
		}
	case reduceLogSumExp:
		peak := make([]float64, len(o))
		for i := range peak {
			peak[i] = math.Inf(-1)
		}
		eachReduced(shape, reduced, func(ix, io int) { peak[io] = max(peak[io], float64(xs[ix])) })
		for i, p := range peak {
			if math.IsInf(p, 0) { // all -Inf (or +Inf present): no shift is needed or possible
				peak[i] = 0
			}
		}
		eachReduced(shape, reduced, func(ix, io int) { acc[io] += math.Exp(float64(xs[ix]) - peak[io]) })
		for i, a := range acc {
			acc[i] = peak[i] + math.Log(a)
		}
	}
	for i, a := range acc {
		o[i] = T(a)
	}
}

// reduceInto reduces integers of type T in the type itself (products and
// sums of squares wrap, as numpy's fixed-width arithmetic does); the min
// of no elements is the type's maximum. LogSum and LogSumExp are
// float-only.
func (k intOf[T]) reduceInto(kind reduceKind, x *value, reduced []bool, out any) error {
	xs, o := x.data.([]T), out.([]T)
	switch kind {
	case reduceMin:
		for i := range o {
			o[i] = k.highest
		}
		eachReduced(x.shape, reduced, func(ix, io int) { o[io] = min(o[io], xs[ix]) })
	case reduceProd:
		for i := range o {
			o[i] = 1
		}
		eachReduced(x.shape, reduced, func(ix, io int) { o[io] *= xs[ix] })
	case reduceL1:
		eachReduced(x.shape, reduced, func(ix, io int) {
			v := xs[ix]
			if v < 0 {
				v = 0 - v
			}
			o[io] += v
		})
	case reduceSumSquare:
		eachReduced(x.shape, reduced, func(ix, io int) { o[io] += xs[ix] * xs[ix] })
	default:
		return errDType(x, "float32 or float64")
	}
	return nil
}

// argOp is the kernel of ArgMax (largest) and ArgMin: the int64 index of
// the first extreme element along axis (the last with select_last_index).
// NaN counts as the extreme, as numpy's argmax and argmin take it.
func argOp(largest bool) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		x := in[0]
		if !x.dtype.isNumeric() {
			return nil, errDType(x, "a numeric type")
		}
		axis, err := normalizeAxis(int(n.attrInt("axis", 0)), x.rank())
		if err != nil {
			return nil, err
		}
		last := n.attrInt("select_last_index", 0) == 1
		outer, d, inner := numel(x.shape[:axis]), x.shape[axis], numel(x.shape[axis+1:])
		if d == 0 {
			return nil, fmt.Errorf("axis %d has size 0", axis)
		}
		kept := slices.Clone(x.shape)
		kept[axis] = 1
		out, err := rc.alloc(n, Int64, kept)
		if err != nil {
			return nil, err
		}
		o := out.data.([]int64)
		if x.dtype == Int64 || x.dtype == Uint64 { // float64 would merge neighbours beyond 2^53
			argExact(x, largest, last, outer, d, inner, o)
		} else {
			argIndex(castTo[float64](x.data), largest, last, outer, d, inner, o)
		}
		if n.attrInt("keepdims", 1) == 0 {
			out = out.withShape(slices.Delete(kept, axis, axis+1))
		}
		return one(out)
	}
}

// argIndex finds the extreme index of xs viewed as (outer, d, inner)
// along d into o (outer·inner).
func argIndex[T number](xs []T, largest, last bool, outer, d, inner int, o []int64) {
	for a := range outer {
		for c := range inner {
			base := a*d*inner + c
			best := 0
			for j := 1; j < d; j++ {
				v, b := xs[base+j*inner], xs[base+best*inner]
				if v != v || b != b { // NaN: the first one wins, or the last with select_last_index
					if v != v && (b == b || last) {
						best = j
					}
					continue
				}
				better := v > b
				if !largest {
					better = v < b
				}
				if better || last && v == b {
					best = j
				}
			}
			o[a*inner+c] = int64(best)
		}
	}
}

// argExact is argIndex on 64-bit integers in their own type.
func argExact(x *value, largest, last bool, outer, d, inner int, o []int64) {
	if x.dtype == Int64 {
		argIndex(x.data.([]int64), largest, last, outer, d, inner, o)
		return
	}
	argIndex(x.data.([]uint64), largest, last, outer, d, inner, o)
}
