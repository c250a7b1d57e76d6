package exec

import (
	"fmt"
	"math"
)

// constantOp is the kernel of Constant. Graph preparation runs it once
// and stores the result like an initializer.
func constantOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	if len(n.attrs) != 1 {
		return nil, fmt.Errorf("exactly one value attribute is required, got %d", len(n.attrs))
	}
	for name, a := range n.attrs {
		switch name {
		case "value":
			return one(a.t)
		case "value_float":
			return one(scalarOf(a.f))
		case "value_floats":
			return one(valueOf([]int{len(a.floats)}, a.floats))
		case "value_int":
			return one(scalarOf(a.i))
		case "value_ints":
			return one(valueOf([]int{len(a.ints)}, a.ints))
		default:
			return nil, fmt.Errorf("attribute %s is not supported (string and sparse constants)", name)
		}
	}
	panic("unreachable")
}

// constantOfShapeOp is the kernel of ConstantOfShape: a tensor of the given
// shape filled with the one-element value attribute (float32 0 by default).
func constantOfShapeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	shape, err := shapeInput(rc, n, in[0])
	if err != nil {
		return nil, err
	}
	fill := scalarOf(float32(0))
	if a, ok := n.attrs["value"]; ok {
		if a.t.size() != 1 {
			return nil, fmt.Errorf("value must hold one element, it has shape %s", shapeString(a.t.shape))
		}
		fill = a.t
	}
	return oneOrErr(gather(rc, n, fill, view{strides: make([]int, len(shape))}, shape))
}

// rangeOp is the kernel of Range: start, start+delta, ... up to but
// excluding limit; ceil((limit-start)/delta) elements, at least 0.
func rangeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	if err := sameDType(in); err != nil {
		return nil, err
	}
	for _, v := range in {
		if v.size() != 1 {
			return nil, fmt.Errorf("start, limit and delta must be scalars, got shape %s", shapeString(v.shape))
		}
	}
	switch in[0].dtype {
	case Float32:
		return oneOrErr(rangeT(rc, n, in, floatCount[float32]))
	case Float64:
		return oneOrErr(rangeT(rc, n, in, floatCount[float64]))
	case Int64:
		return oneOrErr(rangeT(rc, n, in, intCount[int64]))
	case Int32:
		return oneOrErr(rangeT(rc, n, in, intCount[int32]))
	case Int16:
		return oneOrErr(rangeT(rc, n, in, intCount[int16]))
	}
	return nil, errDType(in[0], "float32, float64, int64, int32 or int16")
}

// rangeT is rangeOp for one element type, whose element count count
// computes.
func rangeT[T number](rc *runCtx, n *node, in []*value, count func(start, limit, delta T) (int, error)) (*value, error) {
	start, limit, delta := in[0].data.([]T)[0], in[1].data.([]T)[0], in[2].data.([]T)[0]
	if delta == 0 {
		return nil, fmt.Errorf("delta is 0")
	}
	c, err := count(start, limit, delta)
	if err != nil {
		return nil, fmt.Errorf("range(%v, %v, %v): %w", start, limit, delta, err)
	}
	out, err := rc.alloc(n, in[0].dtype, []int{c})
	if err != nil {
		return nil, err
	}
	// For integers, i·delta may wrap where start + i·delta does not: the
	// sum is still exact in two's complement.
	for i, o := 0, out.data.([]T); i < c; i++ {
		o[i] = start + T(i)*delta
	}
	return out, nil
}

// floatCount is max(ceil((limit - start) / delta), 0) in float64; counts
// beyond int are math.MaxInt, which the budget refuses.
func floatCount[T float](start, limit, delta T) (int, error) {
	c := math.Ceil((float64(limit) - float64(start)) / float64(delta))
	switch {
	case math.IsNaN(c):
		return 0, fmt.Errorf("the element count is NaN")
	case c <= 0:
		return 0, nil
	case c >= math.MaxInt:
		return math.MaxInt, nil
	}
	return int(c), nil
}

// intCount is max(ceil((limit - start) / delta), 0), exact for every
// int64 start, limit and delta (delta != 0): the distance is taken in
// uint64, where limit - start cannot overflow.
func intCount[T integer](start, limit, delta T) (int, error) {
	s, l, d := int64(start), int64(limit), int64(delta)
	var c uint64
	switch {
	case d > 0 && l > s:
		c = (uint64(l)-uint64(s)-1)/uint64(d) + 1
	case d < 0 && l < s:
		c = (uint64(s)-uint64(l)-1)/(uint64(-(d+1))+1) + 1 // -d, even for math.MinInt64
	}
	return int(min(c, math.MaxInt)), nil
}

// triluOp is the kernel of Trilu: it keeps the upper (default) or lower
// triangle of the last two axes, shifted by the optional k input
// (j-i >= k for upper, j-i <= k for lower) and zeroes the rest.
func triluOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	r := x.rank()
	if r < 2 {
		return nil, fmt.Errorf("input must have rank >= 2, has shape %s", shapeString(x.shape))
	}
	var k int64
	if v := input(in, 1); v != nil {
		ks, err := ints(rc, n, v)
		if err != nil || len(ks) != 1 {
			return nil, fmt.Errorf("k must be an int64 scalar, got %s", v.describe())
		}
		k = ks[0]
	}
	upper := n.attrInt("upper", 1) == 1
	rows, cols := x.shape[r-2], x.shape[r-1]
	if x.size() == 0 {
		return one(x)
	}
	keep, err := scratch[bool](rc, n, rows*cols, "triangle mask")
	if err != nil {
		return nil, err
	}
	for i := range rows {
		for j := range cols {
			diff := int64(j - i)
			keep[i*cols+j] = upper && diff >= k || !upper && diff <= k
		}
	}
	mask := valueOf([]int{rows, cols}, keep)
	return oneOrErr(where(rc, n, mask, x, newValue(x.dtype, []int{})))
}

// dropoutOp is the kernel of Dropout at inference: the output is the input
// and the optional mask is all true (all ones of the input type before
// opset 10). In training mode (opset 12 on, training_mode input true) only
// ratio 0 is deterministic; other ratios are refused rather than drawn.
func dropoutOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if n.opset >= 12 {
		if t := input(in, 2); t != nil && t.dtype == Bool && t.size() == 1 && t.data.([]bool)[0] {
			ratio := 0.5
			if r := input(in, 1); r != nil && r.dtype.IsFloat() && r.size() == 1 {
				ratio = castTo[float64](r.data)[0]
			}
			if ratio != 0 {
				return nil, fmt.Errorf("training-mode Dropout with ratio %g draws a random mask; only inference is supported", ratio)
			}
		}
	}
	if len(n.out) < 2 || n.out[1] < 0 {
		return []*value{x, nil}, nil
	}
	maskType := Bool
	if n.opset < 10 {
		maskType = x.dtype
	}
	ones := castValue(scalarOf(true), maskType)
	mask, err := gather(rc, n, ones, view{strides: make([]int, x.rank())}, x.shape)
	if err != nil {
		return nil, err
	}
	return []*value{x, mask}, nil
}
