package exec

import (
	"fmt"
	"math"
	"slices"
)

// Index-driven data movement: GatherElements, GatherND, ScatterElements,
// ScatterND, NonZero, OneHot and EyeLike. Every index read from data is
// range-checked; negative indices count from the end where the spec
// allows them.
func init() {
	ops["GatherElements"] = &opSpec{since: 11, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: gatherElementsOp,
		attrs: map[string]attrKind{"axis": attrInt}}
	ops["GatherND"] = &opSpec{since: 11, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: gatherNDOp,
		attrs: map[string]attrKind{"batch_dims": attrInt}}
	ops["ScatterElements"] = &opSpec{since: 11, minIn: 3, maxIn: 3, minOut: 1, maxOut: 1, run: scatterElementsOp,
		attrs: map[string]attrKind{"axis": attrInt, "reduction": attrString}}
	ops["ScatterND"] = &opSpec{since: 11, minIn: 3, maxIn: 3, minOut: 1, maxOut: 1, run: scatterNDOp,
		attrs: map[string]attrKind{"reduction": attrString}}
	ops["NonZero"] = unarySpec(9, nonZeroOp)
	ops["OneHot"] = &opSpec{since: 9, minIn: 3, maxIn: 3, minOut: 1, maxOut: 1, run: oneHotOp,
		attrs: map[string]attrKind{"axis": attrInt}}
	ops["EyeLike"] = &opSpec{since: 9, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: eyeLikeOp,
		attrs: map[string]attrKind{"dtype": attrInt, "k": attrInt}}
}

// indexIn resolves index i (negative counts from the end) against a
// dimension of size d.
func indexIn(i int64, d int, what string) (int, error) {
	if i < -int64(d) || i >= int64(d) {
		return 0, fmt.Errorf("%s index %d is out of range for size %d", what, i, d)
	}
	if i < 0 {
		i += int64(d)
	}
	return int(i), nil
}

// take fills out.data[k] = src.data[from[k]] for every k; both values have
// the same element type.
func take(out, src *value, from []int) {
	elemKindOfData(out.data).take(out.data, src.data, from)
}

// take is take for type T.
func (elemOf[T]) take(dst, src any, from []int) {
	d, s := dst.([]T), src.([]T)
	for k, f := range from {
		d[k] = s[f]
	}
}

// gatherElementsOp is the kernel of GatherElements: the output has the
// indices' shape, and out[..., i, ...] = data[..., indices[..., i, ...],
// ...] with the index replacing the coordinate along axis.
func gatherElementsOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	data, iv := in[0], in[1]
	idx, err := ints(rc, n, iv)
	if err != nil {
		return nil, fmt.Errorf("indices: %w", err)
	}
	r := data.rank()
	if iv.rank() != r {
		return nil, fmt.Errorf("indices have rank %d, data rank %d", iv.rank(), r)
	}
	axis, err := normalizeAxis(int(n.attrInt("axis", 0)), r)
	if err != nil {
		return nil, err
	}
	from, err := elementOffsets(idx, iv.shape, data.shape, axis)
	if err != nil {
		return nil, err
	}
	out, err := rc.alloc(n, data.dtype, iv.shape)
	if err != nil {
		return nil, err
	}
	take(out, data, from)
	return one(out)
}

// elementOffsets maps each position of an indices tensor (GatherElements,
// ScatterElements) to the offset in data that it addresses: its own
// coordinates, with the index value along axis.
func elementOffsets(idx []int64, ishape, dshape []int, axis int) ([]int, error) {
	for i, d := range ishape {
		if i != axis && d > dshape[i] {
			return nil, fmt.Errorf("indices shape %s exceeds data shape %s on axis %d", shapeString(ishape), shapeString(dshape), i)
		}
	}
	dst := stridesOf(dshape)
	st := slices.Clone(dst)
	st[axis] = 0
	offs := make([]int, len(idx))
	k := 0
	var err error
	walk(ishape, [][]int{st}, func(off []int, cnt int, step []int) {
		o := off[0]
		for range cnt {
			if err == nil {
				var i int
				i, err = indexIn(idx[k], dshape[axis], "axis")
				offs[k] = o + i*dst[axis]
			}
			o += step[0]
			k++
		}
	})
	return offs, err
}

// gatherNDOp is the kernel of GatherND: each index tuple (the last
// dimension of indices, m long) picks a slice data[b..., i1, ..., im, ...]
// after batch_dims leading dimensions shared by data and indices. The
// output shape is indices.shape[:-1] + data.shape[batch_dims+m:].
func gatherNDOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	data, iv := in[0], in[1]
	idx, err := ints(rc, n, iv)
	if err != nil {
		return nil, fmt.Errorf("indices: %w", err)
	}
	b := int(n.attrInt("batch_dims", 0))
	tuples, m, err := ndTuples(data.shape, iv.shape, b)
	if err != nil {
		return nil, err
	}
	sliceShape := data.shape[b+m:]
	slice := numel(sliceShape)
	shape := slices.Concat(iv.shape[:iv.rank()-1], sliceShape)
	if err := checkExtent(shape); err != nil {
		return nil, err
	}
	starts, err := ndStarts(idx, data.shape, b, m, tuples)
	if err != nil {
		return nil, err
	}
	out, err := rc.alloc(n, data.dtype, shape)
	if err != nil {
		return nil, err
	}
	from := make([]int, 0, out.size())
	for _, s := range starts {
		for j := range slice {
			from = append(from, s+j)
		}
	}
	take(out, data, from)
	return one(out)
}

// ndTuples checks the shapes of GatherND and ScatterND and returns the
// number of index tuples and their length m.
func ndTuples(dshape, ishape []int, b int) (int, int, error) {
	q, r := len(ishape), len(dshape)
	if q < 1 {
		return 0, 0, fmt.Errorf("indices must have rank >= 1")
	}
	m := ishape[q-1]
	if b < 0 || b >= min(q, r) {
		return 0, 0, fmt.Errorf("batch_dims %d is out of range for ranks %d and %d", b, q, r)
	}
	if !equalShapes(dshape[:b], ishape[:b]) {
		return 0, 0, fmt.Errorf("the first %d dimensions of data %s and indices %s differ", b, shapeString(dshape), shapeString(ishape))
	}
	if m < 1 || b+m > r {
		return 0, 0, fmt.Errorf("index tuples of length %d do not fit data of rank %d after %d batch dimensions", m, r, b)
	}
	return numel(ishape[:q-1]), m, nil
}

// ndStarts resolves each index tuple to the offset of the data slice it
// addresses, within its batch.
func ndStarts(idx []int64, dshape []int, b, m, tuples int) ([]int, error) {
	st := stridesOf(dshape)
	perBatch := tuples / max(numel(dshape[:b]), 1)
	starts := make([]int, tuples)
	for t := range tuples {
		off := 0
		if b > 0 {
			off = t / perBatch * st[b-1]
		}
		for j := range m {
			i, err := indexIn(idx[t*m+j], dshape[b+j], fmt.Sprintf("dimension %d", b+j))
			if err != nil {
				return nil, err
			}
			off += i * st[b+j]
		}
		starts[t] = off
	}
	return starts, nil
}

// scatterElementsOp is the kernel of ScatterElements: a copy of data in
// which each updates element lands where the matching indices element
// points along axis, combined by reduction (none, add, mul from opset 16;
// max, min from 18).
func scatterElementsOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	data, iv, upd := in[0], in[1], in[2]
	idx, err := ints(rc, n, iv)
	if err != nil {
		return nil, fmt.Errorf("indices: %w", err)
	}
	if !equalShapes(iv.shape, upd.shape) || iv.rank() != data.rank() {
		return nil, fmt.Errorf("indices %s and updates %s must have one shape of data's rank %d", shapeString(iv.shape), shapeString(upd.shape), data.rank())
	}
	axis, err := normalizeAxis(int(n.attrInt("axis", 0)), data.rank())
	if err != nil {
		return nil, err
	}
	to, err := elementOffsets(idx, iv.shape, data.shape, axis)
	if err != nil {
		return nil, err
	}
	return scatter(rc, n, data, upd, to, 1)
}

// scatterNDOp is the kernel of ScatterND: a copy of data in which each
// index tuple's slice is replaced by (or reduced with) the matching slice
// of updates, whose shape is indices.shape[:-1] + data.shape[m:].
func scatterNDOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	data, iv, upd := in[0], in[1], in[2]
	idx, err := ints(rc, n, iv)
	if err != nil {
		return nil, fmt.Errorf("indices: %w", err)
	}
	tuples, m, err := ndTuples(data.shape, iv.shape, 0)
	if err != nil {
		return nil, err
	}
	if want := slices.Concat(iv.shape[:iv.rank()-1], data.shape[m:]); !equalShapes(upd.shape, want) {
		return nil, fmt.Errorf("updates have shape %s, want %s", shapeString(upd.shape), shapeString(want))
	}
	starts, err := ndStarts(idx, data.shape, 0, m, tuples)
	if err != nil {
		return nil, err
	}
	return scatter(rc, n, data, upd, starts, numel(data.shape[m:]))
}

// scatter copies data and writes updates in blocks of block elements: the
// k-th block of updates goes to offset to[k].
func scatter(rc *runCtx, n *node, data, upd *value, to []int, block int) ([]*value, error) {
	if data.dtype != upd.dtype {
		return nil, fmt.Errorf("data is %s but updates are %s", data.dtype, upd.dtype)
	}
	red := n.attrs["reduction"].s
	switch {
	case red == "" || red == "none":
	case (red == "add" || red == "mul") && n.opset >= 16, (red == "max" || red == "min") && n.opset >= 18:
		if !data.dtype.isNumeric() {
			return nil, errDType(data, "a numeric type")
		}
	default:
		return nil, fmt.Errorf("reduction %q is not supported at opset %d", red, n.opset)
	}
	out, err := rc.alloc(n, data.dtype, data.shape)
	if err != nil {
		return nil, err
	}
	if data.dtype == Int64 || data.dtype == Uint64 || data.dtype == Bool || red == "" || red == "none" {
		// Exact paths: plain replacement moves elements; 64-bit integer
		// reductions stay in their type.
		return one(scatterExact(out, data, upd, to, block, red))
	}
	copy64, u := castTo[float64](data.data), castTo[float64](upd.data)
	for k, t := range to {
		for j := range block {
			copy64[t+j] = reduceScalar(red, copy64[t+j], u[k*block+j])
		}
	}
	return one(castInto(out, copy64))
}

// reduceScalar combines an existing element with an update.
func reduceScalar(red string, x, y float64) float64 {
	switch red {
	case "add":
		return x + y
	case "mul":
		return x * y
	case "max":
		return math.Max(x, y)
	case "min":
		return math.Min(x, y)
	}
	return y
}

// castInto stores float64 values into out's type (exact for every type
// but the 64-bit integers, which scatterExact handles).
func castInto(out *value, y []float64) *value {
	convertData(out.data, y)
	return out
}

// scatterExact scatters without float64: replacement for every type, and
// the reductions for int64 and uint64.
func scatterExact(out, data, upd *value, to []int, block int, red string) *value {
	out.data = cloneData(data.data)
	switch o := out.data.(type) {
	case []int64:
		scatterInts(o, upd.data.([]int64), to, block, red)
	case []uint64:
		scatterInts(o, upd.data.([]uint64), to, block, red)
	default:
		dstIdx := make([]int, len(to)*block)
		for k, t := range to {
			for j := range block {
				dstIdx[k*block+j] = t + j
			}
		}
		placeAll(out, upd, dstIdx)
	}
	return out
}

// scatterInts applies a reduction to 64-bit integers in their own type.
func scatterInts[T int64 | uint64](o, u []T, to []int, block int, red string) {
	for k, t := range to {
		for j := range block {
			x, y := o[t+j], u[k*block+j]
			switch red {
			case "add":
				x += y
			case "mul":
				x *= y
			case "max":
				x = max(x, y)
			case "min":
				x = min(x, y)
			default:
				x = y
			}
			o[t+j] = x
		}
	}
}

// placeAll writes src's elements in order to out at the offsets to.
func placeAll(out, src *value, to []int) {
	elemKindOfData(out.data).place(out.data, src.data, to)
}

// place is placeAll for type T.
func (elemOf[T]) place(dst, src any, to []int) {
	d, s := dst.([]T), src.([]T)
	for k, t := range to {
		d[t] = s[k]
	}
}

// nonZeroOp is the kernel of NonZero: an int64 (rank, count) tensor of the
// coordinates of the nonzero elements in row-major order.
func nonZeroOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	nz := make([]bool, x.size())
	convertToBool(nz, x.data)
	var hits []int
	for i, b := range nz {
		if b {
			hits = append(hits, i)
		}
	}
	out, err := rc.alloc(n, Int64, []int{x.rank(), len(hits)})
	if err != nil {
		return nil, err
	}
	o := out.data.([]int64)
	st := stridesOf(x.shape)
	for k, h := range hits {
		for d := range x.rank() {
			o[d*len(hits)+k] = int64(h / st[d] % x.shape[d])
		}
	}
	return one(out)
}

// oneHotOp is the kernel of OneHot: a new axis of size depth (at axis,
// default -1 meaning last) holding values[1] at each index and values[0]
// elsewhere. Negative indices count from the end from opset 11 on; other
// indices outside [0, depth) give a row of values[0].
func oneHotOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	iv, dv, vals := in[0], in[1], in[2]
	if dv.size() != 1 {
		return nil, fmt.Errorf("depth must hold one value, has shape %s", shapeString(dv.shape))
	}
	if vals.size() != 2 {
		return nil, fmt.Errorf("values must hold [off, on], has shape %s", shapeString(vals.shape))
	}
	depthF := castTo[float64](dv.data)[0]
	if depthF < 1 || depthF > maxDimension {
		return nil, fmt.Errorf("depth %v is not a positive size", depthF)
	}
	depth := int(depthF)
	idx := castTo[float64](iv.data) // indices may be of any numeric type
	r := iv.rank() + 1
	axis, err := normalizeAxis(int(n.attrInt("axis", -1)), r)
	if err != nil {
		return nil, err
	}
	shape := slices.Insert(slices.Clone(iv.shape), axis, depth)
	if err := checkExtent(shape); err != nil {
		return nil, err
	}
	out, err := rc.alloc(n, vals.dtype, shape)
	if err != nil {
		return nil, err
	}
	outer, inner := numel(iv.shape[:axis]), numel(iv.shape[axis:])
	from := make([]int, out.size()) // 0: off, 1: on
	for o := range outer {
		for i := range inner {
			k := int64(idx[o*inner+i]) // numpy truncates float indices
			if k < 0 && n.opset >= 11 {
				k += int64(depth)
			}
			if k >= 0 && k < int64(depth) {
				from[(o*depth+int(k))*inner+i] = 1
			}
		}
	}
	take(out, vals.withShape([]int{2}), from)
	return one(out)
}

// eyeLikeOp is the kernel of EyeLike: a 2-D tensor of the input's shape
// with ones on diagonal k (above the main one for k > 0), of type dtype
// (default the input's).
func eyeLikeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if x.rank() != 2 {
		return nil, fmt.Errorf("input has rank %d, want 2", x.rank())
	}
	dt := x.dtype
	if n.has("dtype") {
		dt = DType(n.attrInt("dtype", 0))
		if err := checkDType(dt); err != nil {
			return nil, err
		}
	}
	k := n.attrInt("k", 0)
	rows, cols := x.shape[0], x.shape[1]
	ones := make([]bool, rows*cols)
	for i := range rows {
		if j := int64(i) + k; j >= 0 && j < int64(cols) {
			ones[i*cols+int(j)] = true
		}
	}
	out, err := rc.alloc(n, dt, x.shape)
	if err != nil {
		return nil, err
	}
	convertData(out.data, ones)
	return one(out)
}
