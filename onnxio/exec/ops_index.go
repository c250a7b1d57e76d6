package exec

import (
	"fmt"
	"math"
	"slices"

	"github.com/attnrun/attnrun/internal/budget"
)

// concatOp is the kernel of Concat.
func concatOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	if err := sameDType(in); err != nil {
		return nil, err
	}
	first := in[0]
	r := first.rank()
	axis, err := normalizeAxis(int(n.attrInt("axis", 0)), r)
	if err != nil {
		return nil, err
	}
	shape := slices.Clone(first.shape)
	shape[axis] = 0
	for _, v := range in {
		if v.rank() != r {
			return nil, fmt.Errorf("inputs have ranks %d and %d", r, v.rank())
		}
		for i, d := range v.shape {
			if i != axis && d != first.shape[i] {
				return nil, fmt.Errorf("shapes %s and %s differ outside axis %d", shapeString(first.shape), shapeString(v.shape), axis)
			}
		}
		if shape[axis], err = addDims(shape[axis], v.shape[axis]); err != nil {
			return nil, err
		}
	}
	out, err := rc.alloc(n, first.dtype, shape)
	if err != nil {
		return nil, err
	}
	dst := contiguous(shape)
	for _, v := range in {
		copyView(out.data, dst, v.data, contiguous(v.shape), v.shape)
		dst.offset += v.shape[axis] * dst.strides[axis]
	}
	return one(out)
}

// sliceOp is the kernel of Slice: starts, ends and axes are attributes in
// opsets 1 to 9; from 10 they are inputs, with optional axes and steps.
func sliceOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	var starts, ends, axes, steps []int64
	if n.opset < 10 {
		starts, _ = n.attrInts("starts")
		ends, _ = n.attrInts("ends")
		axes, _ = n.attrInts("axes")
	} else {
		var err error
		for i, dst := range []*[]int64{&starts, &ends, &axes, &steps} {
			if v := input(in, i+1); v != nil {
				if *dst, err = ints(rc, n, v); err != nil {
					return nil, fmt.Errorf("input %d: %w", i+1, err)
				}
			}
		}
	}
	if len(ends) != len(starts) {
		return nil, fmt.Errorf("%d starts but %d ends", len(starts), len(ends))
	}
	if axes == nil {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	if steps == nil {
		steps = slices.Repeat([]int64{1}, len(starts))
	}
	if len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, fmt.Errorf("%d starts, %d axes and %d steps differ in length", len(starts), len(axes), len(steps))
	}
	pos, err := normalizeAxes(axes, x.rank())
	if err != nil {
		return nil, err
	}
	shape := slices.Clone(x.shape)
	sv := contiguous(x.shape)
	for i, a := range pos {
		start, count, err := sliceRange(starts[i], ends[i], steps[i], x.shape[a])
		if err != nil {
			return nil, fmt.Errorf("axis %d: %w", a, err)
		}
		sv.offset += start * sv.strides[a]
		if count > 1 { // then |step| < dim, and the stride cannot overflow
			sv.strides[a] *= int(steps[i])
		}
		shape[a] = count
	}
	return oneOrErr(gather(rc, n, x, sv, shape))
}

// sliceRange resolves one axis of a Slice as the spec does: negative
// starts and ends count from the end, then both are clamped ([0, d] for
// positive steps, [-1, d-1] for negative ones, so a slice can run down to
// index 0 inclusive). It returns the first index and the element count,
// ceil((end - start) / step), computed without overflow for any int64
// start, end and step.
func sliceRange(start, end, step int64, dim int) (int, int, error) {
	if step == 0 {
		return 0, 0, fmt.Errorf("step is 0")
	}
	d := int64(dim)
	if start < 0 {
		start += d
	}
	if end < 0 {
		end += d
	}
	var span, stride uint64 // the distance covered and |step|, both positive
	if step > 0 {
		start, end = min(max(start, 0), d), min(max(end, 0), d)
		if end <= start {
			return 0, 0, nil
		}
		span, stride = uint64(end-start), uint64(step)
	} else {
		start, end = min(max(start, 0), d-1), min(max(end, -1), d-1)
		if start <= end {
			return 0, 0, nil
		}
		span, stride = uint64(start-end), uint64(-(step+1))+1 // -step, even for math.MinInt64
	}
	return int(start), int((span-1)/stride + 1), nil
}

// splitOp is the kernel of Split: sizes come from the split attribute
// (before 13) or input (from 13); without them, num_outputs (from 18)
// gives ceil-sized chunks with a smaller last one, and older opsets split
// into equal parts, one per output.
func splitOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	axis, err := normalizeAxis(int(n.attrInt("axis", 0)), x.rank())
	if err != nil {
		return nil, err
	}
	d := x.shape[axis]
	outs := len(n.out)
	var sizes []int64
	if n.opset < 13 {
		sizes, _ = n.attrInts("split")
	} else if v := input(in, 1); v != nil {
		if sizes, err = ints(rc, n, v); err != nil {
			return nil, fmt.Errorf("split: %w", err)
		}
	}
	switch {
	case sizes != nil:
	case n.has("num_outputs"):
		k := int(n.attrInt("num_outputs", 0))
		if k != outs || k < 1 {
			return nil, fmt.Errorf("num_outputs %d does not match the node's %d outputs", k, outs)
		}
		chunk := (d + k - 1) / k
		for i := range k {
			sizes = append(sizes, int64(max(0, min(chunk, d-i*chunk))))
		}
	default:
		if d%outs != 0 {
			return nil, fmt.Errorf("axis %d of size %d does not split into %d equal parts", axis, d, outs)
		}
		sizes = slices.Repeat([]int64{int64(d / outs)}, outs)
	}
	if len(sizes) != outs {
		return nil, fmt.Errorf("%d split sizes for %d outputs", len(sizes), outs)
	}
	left := int64(d) // what the sizes so far leave of the axis
	for _, s := range sizes {
		if s < 0 {
			return nil, fmt.Errorf("negative split size in %v", sizes)
		}
		if s > left {
			return nil, fmt.Errorf("split sizes %v add up to more than the size %d of axis %d", sizes, d, axis)
		}
		left -= s
	}
	if left != 0 {
		return nil, fmt.Errorf("split sizes %v add up to %d, not the size %d of axis %d", sizes, int64(d)-left, d, axis)
	}
	res := make([]*value, outs)
	sv := contiguous(x.shape)
	for i, s := range sizes {
		shape := slices.Clone(x.shape)
		shape[axis] = int(s)
		if res[i], err = gather(rc, n, x, sv, shape); err != nil {
			return nil, err
		}
		sv.offset += int(s) * sv.strides[axis]
	}
	return res, nil
}

// gatherOp is the kernel of Gather: it picks entries along axis by
// index; negative indices count from the end.
func gatherOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, iv := in[0], in[1]
	idx, err := ints(rc, n, iv)
	if err != nil {
		return nil, fmt.Errorf("indices: %w", err)
	}
	r := x.rank()
	axis, err := normalizeAxis(int(n.attrInt("axis", 0)), r)
	if err != nil {
		return nil, err
	}
	d := x.shape[axis]
	outer, inner := numel(x.shape[:axis]), numel(x.shape[axis+1:])
	shape := slices.Concat(x.shape[:axis], iv.shape, x.shape[axis+1:])
	out, err := rc.alloc(n, x.dtype, shape)
	if err != nil {
		return nil, err
	}
	for _, i := range idx {
		if i < -int64(d) || i >= int64(d) {
			return nil, fmt.Errorf("index %d is out of range for axis %d of size %d", i, axis, d)
		}
	}
	elemKindOfData(x.data).gatherBlocks(out.data, x.data, idx, d, outer, inner)
	return one(out)
}

// shapeInput reads a shape input (ConstantOfShape's, Expand's): an
// integer tensor of sizes, none negative.
func shapeInput(rc *runCtx, n *node, v *value) ([]int, error) {
	dims, err := ints(rc, n, v)
	if err != nil {
		return nil, fmt.Errorf("shape: %w", err)
	}
	shape := make([]int, len(dims))
	for i, d := range dims {
		if d < 0 {
			return nil, fmt.Errorf("shape %v has negative dimension %d", dims, d)
		}
		shape[i] = int(d)
	}
	return shape, nil
}

// expandOp is the kernel of Expand: x broadcast (both ways) with shape.
func expandOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	target, err := shapeInput(rc, n, in[1])
	if err != nil {
		return nil, err
	}
	shape, err := broadcastShapes(x.shape, target)
	if err != nil {
		return nil, err
	}
	return oneOrErr(gather(rc, n, x, view{strides: broadcastStrides(x.shape, shape)}, shape))
}

// tileOp is the kernel of Tile. Tiling dimension d by r is a broadcast
// copy into a (r, d) pair of dimensions with strides (0, stride of d),
// which in row-major order is exactly the (r·d) tiled dimension.
func tileOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	reps, err := ints(rc, n, in[1])
	if err != nil {
		return nil, fmt.Errorf("repeats: %w", err)
	}
	if len(reps) != x.rank() {
		return nil, fmt.Errorf("%d repeats for rank %d", len(reps), x.rank())
	}
	st := stridesOf(x.shape)
	var pairs, strides []int
	shape := make([]int, x.rank())
	for i, r := range reps {
		if r < 0 {
			return nil, fmt.Errorf("repeats %v: negative count %d", reps, r)
		}
		pairs = append(pairs, int(r), x.shape[i])
		strides = append(strides, 0, st[i])
		if shape[i] = mulSat(int(r), x.shape[i]); shape[i] == math.MaxInt {
			return nil, fmt.Errorf("repeats %v: axis %d of size %d repeated %d times overflows", reps, i, x.shape[i], r)
		}
	}
	if err := checkExtent(shape); err != nil {
		return nil, err
	}
	if budget.Elements(shape) == 0 { // pairs may not be a valid shape then: (2^40, 0) for (0)
		return oneOrErr(rc.alloc(n, x.dtype, shape))
	}
	tiled, err := gather(rc, n, x, view{strides: strides}, pairs)
	if err != nil {
		return nil, err
	}
	return one(tiled.withShape(shape))
}
