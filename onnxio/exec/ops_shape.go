package exec

import (
	"fmt"
	"math"
	"strconv"
)

// identityOp is the kernel of Identity: values are immutable, so the input
// itself is the output.
func identityOp(rc *runCtx, n *node, in []*value) ([]*value, error) { return one(in[0]) }

// transposeOp is the kernel of Transpose; perm defaults to reversing the
// axes.
func transposeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	r := x.rank()
	perm := make([]int, r)
	if p, ok := n.attrInts("perm"); ok {
		if len(p) != r {
			return nil, fmt.Errorf("perm %v has %d entries for rank %d", p, len(p), r)
		}
		axes, err := normalizeAxes(p, r)
		if err != nil {
			return nil, fmt.Errorf("perm %v: %w", p, err)
		}
		copy(perm, axes)
	} else {
		for i := range perm {
			perm[i] = r - 1 - i
		}
	}
	st := stridesOf(x.shape)
	shape := make([]int, r)
	strides := make([]int, r)
	for i, p := range perm {
		shape[i], strides[i] = x.shape[p], st[p]
	}
	return oneOrErr(gather(rc, n, x, view{strides: strides}, shape))
}

// reshapeOp is the kernel of Reshape (opset 5 on, shape as an input).
func reshapeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	spec, err := ints(rc, n, in[1])
	if err != nil {
		return nil, fmt.Errorf("shape: %w", err)
	}
	shape, err := reshapeTarget(x.shape, spec, n.attrInt("allowzero", 0) == 1)
	if err != nil {
		return nil, err
	}
	return one(x.withShape(shape))
}

// reshapeTarget resolves a Reshape shape against the input shape: 0 copies
// the input's dimension (unless allowzero, where it means 0), one -1 is
// inferred from the remaining size. The product of the other dimensions is
// computed without overflow: it must divide the input's size, or, without
// -1, equal it.
func reshapeTarget(in []int, spec []int64, allowZero bool) ([]int, error) {
	out := make([]int, len(spec))
	infer := -1
	for i, d := range spec {
		switch {
		case d == -1:
			if infer >= 0 {
				return nil, fmt.Errorf("shape %v has more than one -1", spec)
			}
			infer = i
		case d < -1:
			return nil, fmt.Errorf("shape %v has invalid dimension %d", spec, d)
		case d == 0 && !allowZero:
			if i >= len(in) {
				return nil, fmt.Errorf("shape %v copies dimension %d (0) but the input %s has rank %d", spec, i, shapeString(in), len(in))
			}
			out[i] = in[i]
		default:
			out[i] = int(d)
		}
	}
	total := numel(in)
	known := 1 // the product of the dimensions other than -1, saturated
	for i, d := range out {
		if i != infer {
			known = mulSat(known, d)
		}
	}
	if infer >= 0 {
		if known == 0 {
			if total != 0 {
				return nil, fmt.Errorf("cannot reshape %s (%d elements) to %v: the other dimensions hold zero elements", shapeString(in), total, spec)
			}
			return nil, fmt.Errorf("cannot infer the -1 in shape %v: the other dimensions hold zero elements", spec)
		}
		if total%known != 0 {
			return nil, fmt.Errorf("cannot reshape %s (%d elements) to %v", shapeString(in), total, spec)
		}
		out[infer] = total / known
	} else if known != total {
		count := strconv.Itoa(known)
		if known == math.MaxInt {
			count = "too many"
		}
		return nil, fmt.Errorf("cannot reshape %s (%d elements) to %v (%s elements)", shapeString(in), total, spec, count)
	}
	if err := checkExtent(out); err != nil {
		return nil, err
	}
	return out, nil
}

// flattenOp is the kernel of Flatten: a 2-D reshape at axis (default 1).
func flattenOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	r := x.rank()
	axis := int(n.attrInt("axis", 1))
	if axis < -r || axis > r {
		return nil, fmt.Errorf("axis %d is out of range for rank %d", axis, r)
	}
	if axis < 0 {
		axis += r
	}
	return one(x.withShape([]int{numel(x.shape[:axis]), numel(x.shape[axis:])}))
}

// shapeOp is the kernel of Shape; start and end (opset 15) select a range
// of dimensions and are clamped to the rank, as the spec says.
func shapeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	r := int64(x.rank())
	clamp := func(i int64) int {
		if i < 0 {
			i += r
		}
		return int(min(max(i, 0), r))
	}
	start, end := clamp(n.attrInt("start", 0)), clamp(n.attrInt("end", r))
	kept := x.shape[start:max(start, end)]
	out, err := rc.alloc(n, Int64, []int{len(kept)})
	if err != nil {
		return nil, err
	}
	dims := out.data.([]int64)
	for i, d := range kept {
		dims[i] = int64(d)
	}
	return one(out)
}

// sizeOp is the kernel of Size: the number of elements, as an int64
// scalar.
func sizeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	return one(scalarOf(int64(in[0].size())))
}

// axesOf reads the axes of Unsqueeze, Squeeze and the Reduce ops: an
// attribute before opset `since`, an (optional) input at index 1 from it.
// An axes input before `since` is an error, not silently ignored.
func axesOf(rc *runCtx, n *node, in []*value, since int) ([]int64, bool, error) {
	if n.opset < since {
		if input(in, 1) != nil {
			return nil, false, fmt.Errorf("has an axes input, which %s takes from opset %d on (opset %d has the axes attribute)", n.op, since, n.opset)
		}
		axes, ok := n.attrInts("axes")
		return axes, ok, nil
	}
	v := input(in, 1)
	if v == nil {
		return nil, false, nil
	}
	axes, err := ints(rc, n, v)
	if err != nil {
		return nil, false, fmt.Errorf("axes: %w", err)
	}
	return axes, true, nil
}

// unsqueezeOp is the kernel of Unsqueeze: axes (attribute before 13,
// input from 13) are positions in the output.
func unsqueezeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	axes, ok, err := axesOf(rc, n, in, 13)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("axes are required")
	}
	r := x.rank() + len(axes)
	pos, err := normalizeAxes(axes, r)
	if err != nil {
		return nil, err
	}
	shape := make([]int, r)
	for _, p := range pos {
		shape[p] = -1
	}
	next := 0
	for i := range shape {
		if shape[i] == -1 {
			shape[i] = 1
		} else {
			shape[i] = x.shape[next]
			next++
		}
	}
	return one(x.withShape(shape))
}

// squeezeOp is the kernel of Squeeze: it removes the given axes (which
// must have size 1), or every axis of size 1 when none are given.
func squeezeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	axes, ok, err := axesOf(rc, n, in, 13)
	if err != nil {
		return nil, err
	}
	drop := make([]bool, x.rank())
	if ok {
		pos, err := normalizeAxes(axes, x.rank())
		if err != nil {
			return nil, err
		}
		for _, p := range pos {
			if x.shape[p] != 1 {
				return nil, fmt.Errorf("cannot squeeze axis %d of size %d in %s", p, x.shape[p], shapeString(x.shape))
			}
			drop[p] = true
		}
	} else {
		for i, d := range x.shape {
			drop[i] = d == 1
		}
	}
	shape := []int{}
	for i, d := range x.shape {
		if !drop[i] {
			shape = append(shape, d)
		}
	}
	return one(x.withShape(shape))
}
