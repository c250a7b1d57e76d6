package exec

import (
	"fmt"
	"math"
)

// The pools. MaxPool gained its Indices output and storage_order at opset
// 8, ceil_mode and dilations at 10, and 8-bit types at 12; AveragePool
// gained count_include_pad at 7, ceil_mode at 10 and dilations at 19;
// LpPool took an integer p from opset 2 and gained ceil_mode and
// dilations at 18. A node of an older opset cannot carry the attributes
// its version lacks, so one kernel per op serves every version from the
// first whose attributes it reads the same way.
func init() {
	windowAttrs := func(extra ...string) map[string]attrKind {
		m := map[string]attrKind{"auto_pad": attrString, "kernel_shape": attrInts, "pads": attrInts,
			"strides": attrInts, "dilations": attrInts, "ceil_mode": attrInt}
		for _, name := range extra {
			m[name] = attrInt
		}
		return m
	}
	ops["MaxPool"] = &opSpec{since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 2, run: maxPoolOp,
		attrs: windowAttrs("storage_order"), check: needKernelShape}
	ops["AveragePool"] = &opSpec{since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: averagePoolOp,
		attrs: windowAttrs("count_include_pad"), check: needKernelShape}
	ops["LpPool"] = &opSpec{since: 2, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: lpPoolOp,
		attrs: windowAttrs("p"), check: needKernelShape}
	ops["GlobalMaxPool"] = unarySpec(1, globalPoolOp(poolMax))
	ops["GlobalAveragePool"] = unarySpec(1, globalPoolOp(poolAverage))
	ops["GlobalLpPool"] = &opSpec{since: 2, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: globalPoolOp(poolLp),
		attrs: map[string]attrKind{"p": attrInt}}
	ops["LRN"] = &opSpec{since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: lrnOp,
		attrs: map[string]attrKind{"alpha": attrFloat, "beta": attrFloat, "bias": attrFloat, "size": attrInt}, check: needSize}
	ops["MaxUnpool"] = &opSpec{since: 9, minIn: 2, maxIn: 3, minOut: 1, maxOut: 1, run: maxUnpoolOp,
		attrs: map[string]attrKind{"kernel_shape": attrInts, "pads": attrInts, "strides": attrInts}, check: needKernelShape}
}

// needKernelShape refuses a pool without its required kernel_shape.
func needKernelShape(n *node) error {
	if !n.has("kernel_shape") {
		return fmt.Errorf("attribute kernel_shape is required")
	}
	return nil
}

// needSize refuses an LRN without its required size.
func needSize(n *node) error {
	if !n.has("size") {
		return fmt.Errorf("attribute size is required")
	}
	return nil
}

// poolKind is what a pool computes over its window.
type poolKind int

const (
	poolMax poolKind = iota
	poolAverage
	poolLp
)

// pooled checks X (N, C, D1, ..., Dn), works out how the node's kernel
// slides over its spatial axes, and allocates the pool's output (N, C,
// out...) and, unless the output is empty, its tap table.
func pooled(rc *runCtx, n *node, x *value) (y *value, w *window, offs []int64, err error) {
	if err := checkImages(x); err != nil {
		return nil, nil, nil, err
	}
	axes := x.rank() - 2
	if kv, _ := n.attrInts("kernel_shape"); len(kv) != axes {
		return nil, nil, nil, fmt.Errorf("attribute kernel_shape has %d values for %d spatial axes", len(kv), axes)
	}
	kernel, err := spatialInts(n, "kernel_shape", axes, 1)
	if err != nil {
		return nil, nil, nil, err
	}
	if w, err = slidingWindow(n, x.shape[2:], kernel, n.attrInt("ceil_mode", 0) != 0); err != nil {
		return nil, nil, nil, err
	}
	if y, err = rc.alloc(n, x.dtype, append([]int{x.shape[0], x.shape[1]}, w.out...)); err != nil || y.size() == 0 {
		return y, w, nil, err
	}
	offs, err = allocOffsets(rc, n, w)
	return y, w, offs, err
}

// maxPoolOp is the kernel of MaxPool: the largest element of each window,
// padding excluded, and optionally (output 1) its index in X flattened
// row-major, or with the spatial axes column-major for storage_order 1.
// A NaN in the window is the result, as in PyTorch.
func maxPoolOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if !x.dtype.isNumeric() {
		return nil, errDType(x, "a numeric type")
	}
	y, w, offs, err := pooled(rc, n, x)
	if err != nil {
		return nil, err
	}
	var indices []int64
	wantIndices := len(n.out) > 1 && n.out[1] >= 0
	var idx *value
	if wantIndices {
		if idx, err = rc.alloc(n, Int64, y.shape); err != nil {
			return nil, err
		}
		indices = idx.data.([]int64)
	}
	if y.size() > 0 {
		if err := numKindOfData(x.data).maxPool(rc, w, offs, x.data, y.data, indices); err != nil {
			return nil, err
		}
	}
	if !wantIndices {
		return one(y)
	}
	if n.attrInt("storage_order", 0) != 0 {
		columnMajor(indices, w.image)
	}
	return []*value{y, idx}, nil
}

// maxPool computes the window maxima of every (n, c) plane of x into y
// and, when indices is not nil, their flat indices in x.
func (numOf[T]) maxPool(rc *runCtx, w *window, offs []int64, xd, yd any, indices []int64) error {
	taps, positions, imageSize := w.taps(), w.positions(), w.imageSize()
	return eachPlane(rc, w, xd.([]T), yd.([]T), func(plane int, img, out []T) {
		var arg []int64
		if indices != nil {
			arg = indices[plane*positions : (plane+1)*positions]
		}
		for o := range out {
			best, at := lowestOf[T](), int64(-1)
			for t := range taps {
				off := offs[t*positions+o]
				if off < 0 {
					continue
				}
				if v := img[off]; v > best || v != v || at < 0 {
					best, at = v, off
					if v != v {
						break
					}
				}
			}
			out[o] = best
			if arg != nil {
				arg[o] = int64(plane*imageSize) + at
			}
		}
	})
}

// eachPlane calls f for every (n, c) plane of a pool's input x and output
// y, checking the run's context before each.
func eachPlane[T number](rc *runCtx, w *window, x, y []T, f func(plane int, img, out []T)) error {
	positions, imageSize := w.positions(), w.imageSize()
	for plane := range len(y) / positions {
		if err := rc.ctx.Err(); err != nil {
			return err
		}
		f(plane, x[plane*imageSize:(plane+1)*imageSize], y[plane*positions:(plane+1)*positions])
	}
	return nil
}

// lowestOf is the smallest value of T (−Inf for floats).
func lowestOf[T number]() T {
	var z T
	switch p := any(&z).(type) {
	case *float32:
		*p = float32(math.Inf(-1))
	case *float64:
		*p = math.Inf(-1)
	case *int8:
		*p = math.MinInt8
	case *int16:
		*p = math.MinInt16
	case *int32:
		*p = math.MinInt32
	case *int64:
		*p = math.MinInt64
	}
	return z // unsigned: 0
}

// columnMajor rewrites flat row-major indices into tensors whose planes
// have the given spatial shape so that the spatial part counts the first
// axis fastest (MaxPool's storage_order 1); the plane part is unchanged.
func columnMajor(indices []int64, image []int) {
	size := int64(numel(image))
	digits := make([]int64, len(image))
	for i, flat := range indices {
		if flat < 0 {
			continue
		}
		plane, off := flat/size, flat%size
		for a := len(image) - 1; a >= 0; a-- { // row-major digits
			digits[a] = off % int64(image[a])
			off /= int64(image[a])
		}
		col, step := int64(0), int64(1)
		for a, d := range digits {
			col += d * step
			step *= int64(image[a])
		}
		indices[i] = plane*size + col
	}
}

// averagePoolOp is the kernel of AveragePool: the mean of each window.
// The divisor counts the window's elements inside X or, with
// count_include_pad, also those in the explicit padding (never the
// positions beyond it that ceil_mode adds).
func averagePoolOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if !x.dtype.IsFloat() {
		return nil, errDType(x, "float32 or float64")
	}
	y, w, offs, err := pooled(rc, n, x)
	if err != nil || y.size() == 0 {
		return oneOrErr(y, err)
	}
	divisors, err := windowCounts(rc, n, w, n.attrInt("count_include_pad", 0) != 0)
	if err != nil {
		return nil, err
	}
	return oneOrErr(y, sumPool(rc, w, offs, x, y, 1, func(sum float64, i int) float64 { return sum / divisors[i] }))
}

// windowCounts returns, per window position, how many of its taps lie in
// the image or, with includePad, in the image and its padding.
func windowCounts(rc *runCtx, n *node, w *window, includePad bool) ([]float64, error) {
	counts, err := scratch[float64](rc, n, w.positions(), "pooling divisors")
	if err != nil {
		return nil, err
	}
	axes := len(w.image)
	perAxis := make([][]int, axes) // per axis and position: taps inside
	for a := range axes {
		lo, hi := 0, w.image[a]
		if includePad {
			lo, hi = -w.padBegin[a], w.image[a]+w.padEnd[a]
		}
		perAxis[a] = make([]int, w.out[a])
		for o := range w.out[a] {
			for k := range w.kernel[a] {
				if at := o*w.strides[a] - w.padBegin[a] + k*w.dilations[a]; at >= lo && at < hi {
					perAxis[a][o]++
				}
			}
		}
	}
	pos := make([]int, axes)
	for i := range counts {
		c := 1
		for a := range axes {
			c *= perAxis[a][pos[a]]
		}
		counts[i] = float64(c)
		odometer(pos, w.out)
	}
	return counts, nil
}

// sumPool sums |x|^p (x itself for p = 1) over each window's taps inside
// the image and stores finish(sum, position) into y; x and y are float32
// or float64.
func sumPool(rc *runCtx, w *window, offs []int64, x, y *value, p float64, finish func(sum float64, position int) float64) error {
	if x.dtype == Float32 {
		return sumPoolT(rc, w, offs, x.data.([]float32), y.data.([]float32), p, finish)
	}
	return sumPoolT(rc, w, offs, x.data.([]float64), y.data.([]float64), p, finish)
}

// sumPoolT is sumPool for one float type.
func sumPoolT[T float](rc *runCtx, w *window, offs []int64, x, y []T, p float64, finish func(sum float64, position int) float64) error {
	taps, positions := w.taps(), w.positions()
	return eachPlane(rc, w, x, y, func(_ int, img, out []T) {
		for o := range out {
			sum := 0.0
			for t := range taps {
				if off := offs[t*positions+o]; off >= 0 {
					sum += absPow(float64(img[off]), p)
				}
			}
			out[o] = T(finish(sum, o))
		}
	})
}

// absPow is |v|^p, and v itself for p = 1 (the average's sum).
func absPow(v, p float64) float64 {
	switch p {
	case 1:
		return v
	case 2:
		return v * v
	}
	return math.Pow(math.Abs(v), p)
}

// lpPoolOp is the kernel of LpPool: (Σ |x|^p)^(1/p) over each window, the
// padding adding nothing; p defaults to 2.
func lpPoolOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if !x.dtype.IsFloat() {
		return nil, errDType(x, "float32 or float64")
	}
	p, err := lpExponent(n)
	if err != nil {
		return nil, err
	}
	y, w, offs, err := pooled(rc, n, x)
	if err != nil || y.size() == 0 {
		return oneOrErr(y, err)
	}
	return oneOrErr(y, sumPool(rc, w, offs, x, y, p, func(sum float64, _ int) float64 { return lpRoot(sum, p) }))
}

// lpExponent reads the p attribute of LpPool and GlobalLpPool (default 2).
func lpExponent(n *node) (float64, error) {
	p := n.attrInt("p", 2)
	if p < 1 {
		return 0, fmt.Errorf("attribute p %d must be positive", p)
	}
	return float64(p), nil
}

// lpRoot is sum^(1/p).
func lpRoot(sum, p float64) float64 {
	switch p {
	case 1:
		return sum
	case 2:
		return math.Sqrt(sum)
	}
	return math.Pow(sum, 1/p)
}

// globalPoolOp returns the kernel of GlobalMaxPool, GlobalAveragePool or
// GlobalLpPool: the pool over all spatial axes, which become size 1.
func globalPoolOp(kind poolKind) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		x := in[0]
		if !x.dtype.IsFloat() {
			return nil, errDType(x, "float32 or float64")
		}
		if err := checkImages(x); err != nil {
			return nil, err
		}
		p := 1.0
		if kind == poolLp {
			var err error
			if p, err = lpExponent(n); err != nil {
				return nil, err
			}
		}
		shape := []int{x.shape[0], x.shape[1]}
		for range x.rank() - 2 {
			shape = append(shape, 1)
		}
		y, err := rc.alloc(n, x.dtype, shape)
		if err != nil {
			return nil, err
		}
		planeSize := numel(x.shape[2:])
		if x.dtype == Float32 {
			globalPool(kind, p, x.data.([]float32), y.data.([]float32), planeSize)
		} else {
			globalPool(kind, p, x.data.([]float64), y.data.([]float64), planeSize)
		}
		return one(y)
	}
}

// globalPool reduces each plane of planeSize elements of x to one element
// of y.
func globalPool[T float](kind poolKind, p float64, x, y []T, planeSize int) {
	for i := range y {
		plane := x[i*planeSize : (i+1)*planeSize]
		if kind == poolMax {
			best := T(math.Inf(-1))
			for _, v := range plane {
				if v > best || v != v {
					best = v
					if v != v {
						break
					}
				}
			}
			y[i] = best
			continue
		}
		sum := 0.0
		for _, v := range plane {
			sum += absPow(float64(v), p)
		}
		if kind == poolAverage {
			y[i] = T(sum / float64(planeSize))
		} else {
			y[i] = T(lpRoot(sum, p))
		}
	}
}

// maxUnpoolOp is the kernel of MaxUnpool (opset 9 on; 11 and 22 changed
// only types): a zero tensor with each element of X placed at its index
// in I, counted over the whole output flattened row-major. The output's
// spatial sizes are (in − 1)·stride + kernel − pads, or those of the
// output_shape input. ONNX's reference decodes the indices in the first
// shape even when output_shape differs; this kernel does as ONNX Runtime
// and PyTorch's max_unpool, for which the indices address the output.
func maxUnpoolOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, idx := in[0], in[1]
	if !x.dtype.IsFloat() {
		return nil, errDType(x, "float32 or float64")
	}
	if x.rank() < 3 || !equalShapes(idx.shape, x.shape) {
		return nil, fmt.Errorf("input X %s must be (N, C, D1, ...) and I %s of the same shape", shapeString(x.shape), shapeString(idx.shape))
	}
	indices, err := ints(rc, n, idx)
	if err != nil {
		return nil, fmt.Errorf("indices I: %w", err)
	}
	axes := x.rank() - 2
	kernel, err := spatialInts(n, "kernel_shape", axes, 1)
	if err != nil {
		return nil, err
	}
	strides, err := spatialInts(n, "strides", axes, 1)
	if err != nil {
		return nil, err
	}
	begin, end, err := explicitPads(n, axes)
	if err != nil {
		return nil, err
	}
	shape := []int{x.shape[0], x.shape[1]}
	for a := range axes {
		spread := mulSat(max(x.shape[2+a]-1, 0), strides[a])
		if spread > maxDimension {
			return nil, fmt.Errorf("stride %d spreads %d inputs along spatial axis %d over more than %d positions", strides[a], x.shape[2+a], a, maxDimension)
		}
		d := spread + kernel[a] - begin[a] - end[a]
		if d < 0 {
			return nil, fmt.Errorf("pads leave a negative output size %d along spatial axis %d", d, a)
		}
		shape = append(shape, d)
	}
	if v := presentInput(in, 2); v != nil {
		s, err := ints(rc, n, v)
		if err != nil || len(s) != x.rank() {
			return nil, fmt.Errorf("output_shape %s must hold %d integers", v.describe(), x.rank())
		}
		for a, d := range s {
			if d < 0 || d > maxDimension {
				return nil, fmt.Errorf("output_shape %v: size %d is out of range", s, d)
			}
			shape[a] = int(d)
		}
	}
	y, err := rc.alloc(n, x.dtype, shape)
	if err != nil {
		return nil, err
	}
	size := int64(y.size())
	for i, at := range indices {
		if at < 0 || at >= size {
			return nil, fmt.Errorf("index %d at position %d of I is out of range for the output %s", at, i, shapeString(shape))
		}
	}
	switch d := y.data.(type) {
	case []float32:
		scatterAt(d, x.data.([]float32), indices)
	case []float64:
		scatterAt(d, x.data.([]float64), indices)
	}
	return one(y)
}

// scatterAt stores src[i] at dst[indices[i]].
func scatterAt[T any](dst, src []T, indices []int64) {
	for i, at := range indices {
		dst[at] = src[i]
	}
}

// lrnOp is the kernel of LRN (opset 1 on; 13 added bfloat16): each element
// divided by (bias + alpha/size · Σ x²)^beta, the sum running over the
// size channels around its own (floor((size−1)/2) before, ceil((size−1)/2)
// after, those outside the tensor counting zero).
func lrnOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if !x.dtype.IsFloat() {
		return nil, errDType(x, "float32 or float64")
	}
	if x.rank() < 2 {
		return nil, fmt.Errorf("input X %s must be (N, C, ...)", shapeString(x.shape))
	}
	size := n.attrInt("size", 0)
	if size < 1 || size > maxDimension {
		return nil, fmt.Errorf("attribute size %d must be positive", size)
	}
	alpha, beta, bias := float64(n.attrFloat("alpha", 1e-4)), float64(n.attrFloat("beta", 0.75)), float64(n.attrFloat("bias", 1))
	y, err := rc.alloc(n, x.dtype, x.shape)
	if err != nil {
		return nil, err
	}
	before, after := int((size-1)/2), int(size/2)
	channels, planeSize := x.shape[1], numel(x.shape[2:])
	scale := alpha / float64(size)
	switch d := y.data.(type) {
	case []float32:
		localResponse(x.data.([]float32), d, channels, planeSize, before, after, scale, beta, bias)
	case []float64:
		localResponse(x.data.([]float64), d, channels, planeSize, before, after, scale, beta, bias)
	}
	return one(y)
}

// localResponse normalizes every element of x across channels into y.
func localResponse[T float](x, y []T, channels, planeSize, before, after int, scale, beta, bias float64) {
	for i := range y {
		c := i / planeSize % channels
		base := i - c*planeSize
		sum := 0.0
		for k := max(c-before, 0); k <= min(c+after, channels-1); k++ {
			v := float64(x[base+k*planeSize])
			sum += v * v
		}
		y[i] = T(float64(x[i]) / math.Pow(bias+scale*sum, beta))
	}
}
