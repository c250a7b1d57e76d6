package exec

import "fmt"

// CenterCropPad (opset 18).
func init() {
	ops["CenterCropPad"] = &opSpec{since: 18, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: centerCropPadOp,
		attrs: map[string]attrKind{"axes": attrInts}}
}

// centerCropPadOp is the kernel of CenterCropPad: each listed axis (all by
// default) becomes the size in shape, keeping the input centred. A crop
// starts at (size − target)/2 rounded down; a pad puts (target − size)/2
// zeros, rounded down, before the input and the rest after it.
func centerCropPadOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	target, err := ints(rc, n, in[1])
	if err != nil {
		return nil, fmt.Errorf("shape: %w", err)
	}
	axes := make([]int, x.rank())
	for i := range axes {
		axes[i] = i
	}
	if v, ok := n.attrInts("axes"); ok {
		if axes, err = normalizeAxes(v, x.rank()); err != nil {
			return nil, fmt.Errorf("attribute axes: %w", err)
		}
	}
	if len(target) != len(axes) {
		return nil, fmt.Errorf("shape %v has %d sizes for %d axes", target, len(target), len(axes))
	}
	shape := append([]int(nil), x.shape...)
	for i, a := range axes {
		if target[i] < 0 || target[i] > maxDimension {
			return nil, fmt.Errorf("shape %v: size %d is out of range", target, target[i])
		}
		shape[a] = int(target[i])
	}
	y, err := rc.alloc(n, x.dtype, shape)
	if err != nil || y.size() == 0 {
		return oneOrErr(y, err)
	}
	// Copy the part of the input that the output keeps.
	src, dst := contiguous(x.shape), contiguous(shape)
	kept := make([]int, x.rank())
	for a, d := range x.shape {
		kept[a] = min(d, shape[a])
		if d > shape[a] {
			src.offset += (d - shape[a]) / 2 * src.strides[a]
		} else {
			dst.offset += (shape[a] - d) / 2 * dst.strides[a]
		}
	}
	if numel(kept) > 0 {
		copyView(y.data, dst, x.data, src, kept)
	}
	return one(y)
}
