package exec

import (
	"fmt"
	"slices"
)

// Pad: pads and the constant value are attributes before opset 11 and
// inputs from 11; axes is an input from 18, the wrap mode from 19; later
// versions only added element types.
func init() {
	ops["Pad"] = &opSpec{since: 2, minIn: 1, maxIn: 4, minOut: 1, maxOut: 1, run: padOp,
		attrs:        map[string]attrKind{"mode": attrString, "pads": attrInts, "value": attrFloat},
		movedToInput: map[string]int{"pads": 11, "value": 11}}
}

// padOp is the kernel of Pad. pads lists the begin counts of every padded
// axis, then the end counts; a negative count removes elements instead.
// Mode constant (the default) fills with the constant value (0 when
// omitted), edge repeats the border element, reflect mirrors the data
// about its border elements (repeatedly for pads longer than the axis, as
// numpy's pad), and wrap repeats it periodically.
func padOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	r := x.rank()
	pads, fill, axes, err := padInputs(rc, n, in)
	if err != nil {
		return nil, err
	}
	if axes == nil {
		axes = make([]int64, r)
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	pos, err := normalizeAxes(axes, r)
	if err != nil {
		return nil, fmt.Errorf("axes: %w", err)
	}
	if len(pads) != 2*len(pos) {
		return nil, fmt.Errorf("%d pads for %d axes, want %d", len(pads), len(pos), 2*len(pos))
	}
	mode := n.attrs["mode"].s
	switch mode {
	case "":
		mode = "constant"
	case "constant", "edge", "reflect":
	case "wrap":
		if n.opset < 19 {
			return nil, fmt.Errorf("mode wrap is defined from opset 19 on")
		}
	default:
		return nil, fmt.Errorf("mode %q is not constant, reflect, edge or wrap", mode)
	}
	for _, p := range pads {
		if p < -maxDimension || p > maxDimension {
			return nil, fmt.Errorf("pad %d is out of range", p)
		}
	}
	begin, end := make([]int64, r), make([]int64, r)
	for i, a := range pos {
		begin[a], end[a] = pads[i], pads[len(pos)+i]
	}
	shape := make([]int, r)
	srcs := make([][]int, r) // per axis: source index of each output index, -1 for the fill
	for a, d := range x.shape {
		size := int64(d) + begin[a] + end[a]
		if size < 0 || size > maxDimension {
			return nil, fmt.Errorf("axis %d of size %d padded by %d and %d gives size %d", a, d, begin[a], end[a], size)
		}
		if mode != "constant" && d == 0 && size > 0 {
			return nil, fmt.Errorf("mode %s cannot pad axis %d of size 0", mode, a)
		}
		shape[a] = int(size)
		srcs[a] = make([]int, size)
		for i := range srcs[a] {
			srcs[a][i] = padSource(int64(i)-begin[a], d, mode)
		}
	}
	if err := checkExtent(shape); err != nil {
		return nil, err
	}
	out, err := rc.alloc(n, x.dtype, shape)
	if err != nil {
		return nil, err
	}
	from := make([]int, out.size())
	st := stridesOf(x.shape)
	idx := make([]int, r)
	for k := range from {
		off := 0
		for a := range r {
			s := srcs[a][idx[a]]
			if s < 0 {
				off = -1
				break
			}
			off += s * st[a]
		}
		from[k] = off
		for a := r - 1; a >= 0; a-- { // advance the odometer
			if idx[a]++; idx[a] < shape[a] {
				break
			}
			idx[a] = 0
		}
	}
	takeOrFill(out, x, from, fill)
	return one(out)
}

// padInputs reads pads, the constant value (as a one-element value of the
// data's type) and the optional axes from the inputs or, before opset 11,
// the attributes.
func padInputs(rc *runCtx, n *node, in []*value) (pads []int64, fill *value, axes []int64, err error) {
	x := in[0]
	if n.opset < 11 {
		pads, _ = n.attrInts("pads")
		return pads, castValue(scalarOf(float64(n.attrFloat("value", 0))), x.dtype), nil, nil
	}
	pv := input(in, 1)
	if pv == nil {
		return nil, nil, nil, fmt.Errorf("pads input is required")
	}
	if pads, err = ints(rc, n, pv); err != nil {
		return nil, nil, nil, fmt.Errorf("pads: %w", err)
	}
	fill = castValue(scalarOf(0.0), x.dtype)
	if cv := input(in, 2); cv != nil {
		if cv.dtype != x.dtype || cv.size() != 1 {
			return nil, nil, nil, fmt.Errorf("constant_value must be one %s, is %s", x.dtype, cv.describe())
		}
		fill = cv
	}
	if av := input(in, 3); av != nil {
		if n.opset < 18 {
			return nil, nil, nil, fmt.Errorf("the axes input is defined from opset 18 on")
		}
		if axes, err = ints(rc, n, av); err != nil {
			return nil, nil, nil, fmt.Errorf("axes: %w", err)
		}
		axes = slices.Clone(axes)
	}
	return pads, fill, axes, nil
}

// padSource maps a position i along an axis of size d (i < 0 or i >= d
// lie in the padding) to the source index the mode reads, or -1 for the
// constant fill.
func padSource(i int64, d int, mode string) int {
	if i >= 0 && i < int64(d) {
		return int(i)
	}
	switch mode {
	case "edge":
		return int(min(max(i, 0), int64(d)-1))
	case "wrap":
		return int((i%int64(d) + int64(d)) % int64(d))
	case "reflect":
		if d == 1 {
			return 0
		}
		p := 2 * (int64(d) - 1) // the mirror pattern's period
		m := (i%p + p) % p
		if m >= int64(d) {
			m = p - m
		}
		return int(m)
	}
	return -1
}

// takeOrFill fills out.data[k] = src.data[from[k]], or the fill value
// where from[k] is -1.
func takeOrFill(out, src *value, from []int, fill *value) {
	elemKindOfData(out.data).takeOrFill(out.data, src.data, from, fill.data)
}

// takeOrFill is takeOrFill for type T; fill holds the fill value.
func (elemOf[T]) takeOrFill(dst, src any, from []int, fill any) {
	d, s, v := dst.([]T), src.([]T), fill.([]T)[0]
	for k, f := range from {
		if f < 0 {
			d[k] = v
		} else {
			d[k] = s[f]
		}
	}
}
