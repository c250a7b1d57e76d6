package exec

import (
	"fmt"
	"slices"
)

// Ops whose output size depends on the data: Compress and Unique, as
// numpy.compress and numpy.unique define them.
func init() {
	ops["Compress"] = &opSpec{since: 9, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: compressOp,
		attrs: map[string]attrKind{"axis": attrInt}}
	ops["Unique"] = &opSpec{since: 11, minIn: 1, maxIn: 1, minOut: 1, maxOut: 4, run: uniqueOp,
		attrs: map[string]attrKind{"axis": attrInt, "sorted": attrInt}}
}

// items views a tensor as a sequence of items along an axis: the slices
// x[..., i, ...] (outer positions before it, inner after), or with no axis
// the elements of the flattened tensor.
type items struct {
	outer, count, inner int
}

// itemsOf returns the items of x along the node's axis attribute, if any.
func itemsOf(n *node, x *value) (items, int, error) {
	if !n.has("axis") {
		return items{outer: 1, count: x.size(), inner: 1}, -1, nil
	}
	axis, err := normalizeAxis(int(n.attrInt("axis", 0)), x.rank())
	if err != nil {
		return items{}, 0, err
	}
	return items{outer: numel(x.shape[:axis]), count: x.shape[axis], inner: numel(x.shape[axis+1:])}, axis, nil
}

// offsets lists, in row-major order, the element offsets of a tensor made
// of the chosen items.
func (it items) offsets(chosen []int) []int {
	from := make([]int, 0, it.outer*len(chosen)*it.inner)
	for o := range it.outer {
		for _, i := range chosen {
			for c := range it.inner {
				from = append(from, (o*it.count+i)*it.inner+c)
			}
		}
	}
	return from
}

// selectItems returns the chosen items of x as a new value: along axis,
// or flattened when axis is -1.
func selectItems(rc *runCtx, n *node, x *value, it items, axis int, chosen []int) (*value, error) {
	shape := []int{len(chosen)}
	if axis >= 0 {
		shape = slices.Clone(x.shape)
		shape[axis] = len(chosen)
	}
	out, err := rc.alloc(n, x.dtype, shape)
	if err != nil {
		return nil, err
	}
	take(out, x, it.offsets(chosen))
	return out, nil
}

// compressOp is the kernel of Compress: the items along axis (or the
// elements of the flattened input) whose condition is true. A condition
// shorter than the items leaves the rest out, as in numpy.
func compressOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, c := in[0], in[1]
	if c.dtype != Bool || c.rank() != 1 {
		return nil, fmt.Errorf("condition must be a 1-D bool tensor, is %s", c.describe())
	}
	it, axis, err := itemsOf(n, x)
	if err != nil {
		return nil, err
	}
	if c.size() > it.count {
		return nil, fmt.Errorf("condition has %d entries for %d items", c.size(), it.count)
	}
	var chosen []int
	for i, keep := range c.data.([]bool) {
		if keep {
			chosen = append(chosen, i)
		}
	}
	return oneOrErr(selectItems(rc, n, x, it, axis, chosen))
}

// uniqueOp is the kernel of Unique: the distinct items (elements, or
// slices along axis), in ascending lexicographic order or, with sorted 0,
// in the order they first occur; then the int64 index of each one's first
// occurrence, the index of each input item among them, and their counts.
// NaNs equal each other and sort last, as in numpy.unique.
func uniqueOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	it, axis, err := itemsOf(n, x)
	if err != nil {
		return nil, err
	}
	cmp := itemOrder(x, it)
	order := make([]int, it.count)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, cmp)
	// Equal items are now adjacent, the first occurrence first.
	var firsts, counts []int
	group := make([]int, it.count) // item: its group, numbered in sorted order
	for k, i := range order {
		if k == 0 || cmp(order[k-1], i) != 0 {
			firsts = append(firsts, i)
			counts = append(counts, 0)
		}
		group[i] = len(firsts) - 1
		counts[len(counts)-1]++
	}
	rank := make([]int, len(firsts)) // group: its position in the output
	for g := range rank {
		rank[g] = g
	}
	if n.attrInt("sorted", 1) == 0 {
		byFirst := slices.Clone(rank)
		slices.SortFunc(byFirst, func(a, b int) int { return firsts[a] - firsts[b] })
		for pos, g := range byFirst {
			rank[g] = pos
		}
	}
	chosen := make([]int, len(firsts))
	indices, countsOut := make([]int64, len(firsts)), make([]int64, len(firsts))
	for g, first := range firsts {
		chosen[rank[g]], indices[rank[g]], countsOut[rank[g]] = first, int64(first), int64(counts[g])
	}
	inverse := make([]int64, it.count)
	for i, g := range group {
		inverse[i] = int64(rank[g])
	}
	y, err := selectItems(rc, n, x, it, axis, chosen)
	if err != nil {
		return nil, err
	}
	outs := []*value{y}
	for _, v := range [][]int64{indices, inverse, countsOut} {
		o, err := rc.alloc(n, Int64, []int{len(v)})
		if err != nil {
			return nil, err
		}
		copy(o.data.([]int64), v)
		outs = append(outs, o)
	}
	return outs, nil
}

// itemOrder compares two items of x lexicographically, element by element
// in row-major order.
func itemOrder(x *value, it items) func(i, j int) int {
	var elem func(a, b int) int
	switch d := x.data.(type) {
	case []bool:
		elem = func(a, b int) int { return boolCmp(d[a], d[b]) }
	case []int64:
		elem = elemOrder(d)
	case []uint64:
		elem = elemOrder(d)
	default:
		elem = elemOrder(castTo[float64](x.data))
	}
	return func(i, j int) int {
		for o := range it.outer {
			a, b := (o*it.count+i)*it.inner, (o*it.count+j)*it.inner
			for c := range it.inner {
				if r := elem(a+c, b+c); r != 0 {
					return r
				}
			}
		}
		return 0
	}
}

// elemOrder compares elements by offset, NaN after every number.
func elemOrder[T number](xs []T) func(a, b int) int {
	return func(a, b int) int { return cmpNaNLast(xs[a], xs[b]) }
}

// boolCmp orders false before true.
func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}
