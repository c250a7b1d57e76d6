package exec

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/internal/kernels"
)

// Conv and ConvTranspose: versions 11 and 22 only clarified auto_pad and
// added element types, so the opset 1 semantics hold throughout.
func init() {
	ops["Conv"] = &opSpec{since: 1, minIn: 2, maxIn: 3, minOut: 1, maxOut: 1, run: convOp,
		attrs: map[string]attrKind{"auto_pad": attrString, "dilations": attrInts, "group": attrInt,
			"kernel_shape": attrInts, "pads": attrInts, "strides": attrInts}}
	ops["ConvTranspose"] = &opSpec{since: 1, minIn: 2, maxIn: 3, minOut: 1, maxOut: 1, run: convTransposeOp,
		attrs: map[string]attrKind{"auto_pad": attrString, "dilations": attrInts, "group": attrInt,
			"kernel_shape": attrInts, "output_padding": attrInts, "output_shape": attrInts,
			"pads": attrInts, "strides": attrInts}}
	ops["Col2Im"] = &opSpec{since: 18, minIn: 3, maxIn: 3, minOut: 1, maxOut: 1, run: col2ImOp,
		attrs: map[string]attrKind{"dilations": attrInts, "pads": attrInts, "strides": attrInts}}
	ops["DeformConv"] = &opSpec{since: 19, minIn: 3, maxIn: 5, minOut: 1, maxOut: 1, run: deformConvOp,
		attrs: map[string]attrKind{"dilations": attrInts, "group": attrInt, "kernel_shape": attrInts,
			"offset_group": attrInt, "pads": attrInts, "strides": attrInts}}
}

// convShapes are the sizes a grouped convolution works with: the batch,
// the input and output channels of each group, and the group count.
type convShapes struct {
	batch, group, inPerGroup, outPerGroup int
}

// checkConvOperands checks X (N, C, D1, ..., Dn), W of the same rank and
// the optional bias B of outChannels elements, all of one float type, and
// returns the group count.
func checkConvOperands(n *node, x, w, b *value) (int, error) {
	if err := sameDType([]*value{x, w, b}); err != nil {
		return 0, err
	}
	if !x.dtype.IsFloat() {
		return 0, errDType(x, "float32 or float64")
	}
	if err := checkImages(x); err != nil {
		return 0, err
	}
	if w.rank() != x.rank() {
		return 0, fmt.Errorf("weights W %s must have the rank of X %s", shapeString(w.shape), shapeString(x.shape))
	}
	group := n.attrInt("group", 1)
	if group < 1 || group > int64(x.shape[1]) && x.shape[1] > 0 {
		return 0, fmt.Errorf("attribute group %d must be in [1, %d channels]", group, x.shape[1])
	}
	return int(group), nil
}

// convWindow checks the operands of Conv and DeformConv, X (N, C, D1, ...,
// Dn), W (M, C/group, k1, ..., kn) and the optional bias B (M), and returns
// their channel counts and how W's kernel slides over X.
func convWindow(n *node, x, w, b *value) (convShapes, *window, error) {
	group, err := checkConvOperands(n, x, w, b)
	if err != nil {
		return convShapes{}, nil, err
	}
	channels, outChannels := x.shape[1], w.shape[0]
	if channels%group != 0 || outChannels%group != 0 {
		return convShapes{}, nil, fmt.Errorf("%d input and %d output channels do not divide into %d groups", channels, outChannels, group)
	}
	if w.shape[1] != channels/group {
		return convShapes{}, nil, fmt.Errorf("weights W %s must have %d input channels per group (X %s, group %d)", shapeString(w.shape), channels/group, shapeString(x.shape), group)
	}
	if err := checkBias(b, outChannels); err != nil {
		return convShapes{}, nil, err
	}
	kernel, err := kernelShape(n, w.shape[2:])
	if err != nil {
		return convShapes{}, nil, err
	}
	win, err := slidingWindow(n, x.shape[2:], kernel, false)
	if err != nil {
		return convShapes{}, nil, err
	}
	return convShapes{batch: x.shape[0], group: group, inPerGroup: channels / group, outPerGroup: outChannels / group}, win, nil
}

// checkBias checks that an optional bias B has one element per output
// channel.
func checkBias(b *value, outChannels int) error {
	if b != nil && (b.rank() != 1 || b.shape[0] != outChannels) {
		return fmt.Errorf("bias B %s must be (%d,), one bias per output channel", shapeString(b.shape), outChannels)
	}
	return nil
}

// convOp is the kernel of Conv: Y[n, m] = B[m] + Σ W[m, c, k]·X[n, g·C/G + c,
// o·stride − pad + k·dilation] over the C/G channels c of output channel
// m's group g and the kernel taps k. Each group is one matrix product of
// its weights with the im2col matrix of its input channels; float32 runs
// on kernels.Gemm.
func convOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, w, b := in[0], in[1], input(in, 2)
	cs, win, err := convWindow(n, x, w, b)
	if err != nil {
		return nil, err
	}
	shape := append([]int{x.shape[0], w.shape[0]}, win.out...)
	return convolution(rc, n, shape, cs, win, x, w, b, convolve[float32], convolve[float64])
}

// convLoop is the loop of Conv or ConvTranspose for one float type.
type convLoop[T float] func(rc *runCtx, n *node, cs convShapes, win *window, x, w, bias, y []T) error

// convolution allocates the output Y of the given shape for node n and
// fills it with the loop for X's float type.
func convolution(rc *runCtx, n *node, shape []int, cs convShapes, win *window, x, w, b *value,
	loop32 convLoop[float32], loop64 convLoop[float64]) ([]*value, error) {
	y, err := rc.alloc(n, x.dtype, shape)
	if err != nil || y.size() == 0 {
		return oneOrErr(y, err)
	}
	if x.dtype == Float32 {
		err = loop32(rc, n, cs, win, x.data.([]float32), w.data.([]float32), biasData[float32](b), y.data.([]float32))
	} else {
		err = loop64(rc, n, cs, win, x.data.([]float64), w.data.([]float64), biasData[float64](b), y.data.([]float64))
	}
	return oneOrErr(y, err)
}

// biasData returns a bias value's elements, or nil when it is omitted.
func biasData[T float](b *value) []T {
	if b == nil {
		return nil
	}
	return b.data.([]T)
}

// convolve computes a convolution into y (zero-filled, of shape (N, M,
// out...)).
func convolve[T float](rc *runCtx, n *node, cs convShapes, win *window, x, w, bias, y []T) error {
	taps, positions, imageSize := win.taps(), win.positions(), win.imageSize()
	rows := cs.inPerGroup * taps // W's per-group size
	var offs []int64
	var col []T
	if !win.pointwise() { // otherwise the input planes are the column matrix
		var err error
		if offs, err = allocOffsets(rc, n, win); err != nil {
			return err
		}
		if col, err = scratch[T](rc, n, mulSat(rows, positions), "im2col columns"); err != nil {
			return err
		}
	}
	return eachGroup(rc, cs, y, bias, positions, func(b, g, first, out int) {
		src := x[first*imageSize : (first+cs.inPerGroup)*imageSize]
		if col != nil {
			im2col(col, src, offs, cs.inPerGroup, taps, positions, imageSize)
			src = col
		}
		matmulInto(false, cs.outPerGroup, positions, rows,
			w[g*cs.outPerGroup*rows:(g+1)*cs.outPerGroup*rows], src,
			y[out*positions:(out+cs.outPerGroup)*positions])
	})
}

// eachGroup calls f for every group g of every batch image b, with the
// first input and output channel of that group of that image, checking the run's
// context before each; then it adds the bias to each output plane of
// planeSize elements of y.
func eachGroup[T float](rc *runCtx, cs convShapes, y, bias []T, planeSize int, f func(b, g, first, out int)) error {
	channels, outChannels := cs.group*cs.inPerGroup, cs.group*cs.outPerGroup
	for b := range cs.batch {
		for g := range cs.group {
			if err := rc.ctx.Err(); err != nil {
				return err
			}
			f(b, g, b*channels+g*cs.inPerGroup, b*outChannels+g*cs.outPerGroup)
		}
		addChannelBias(y[b*outChannels*planeSize:(b+1)*outChannels*planeSize], bias, planeSize)
	}
	return nil
}

// addChannelBias adds bias[m] to the m-th plane of planeSize elements of y; a nil
// bias adds nothing.
func addChannelBias[T float](y, bias []T, planeSize int) {
	for m, v := range bias {
		plane := y[m*planeSize : (m+1)*planeSize]
		for i := range plane {
			plane[i] += v
		}
	}
}

// matmulInto overwrites c (m×n) with op(a)·b, where b is k×n and op(a) is
// m×k: a as stored, or the transpose of a stored k×m. float32 runs on
// kernels.Gemm; float64 on a plain loop.
func matmulInto[T float](transA bool, m, n, k int, a, b, c []T) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		clear(c)
		return
	}
	if a32, ok := any(a).([]float32); ok {
		lda := k
		if transA {
			lda = m
		}
		kernels.Gemm(transA, false, m, n, k, 1, a32, lda, any(b).([]float32), n, 0, any(c).([]float32), n)
		return
	}
	clear(c)
	for i := range m {
		row := c[i*n : (i+1)*n]
		for p := range k {
			s := a[i*k+p]
			if transA {
				s = a[p*m+i]
			}
			for j, v := range b[p*n : (p+1)*n] {
				row[j] += s * v
			}
		}
	}
}

// convTransposeOp is the kernel of ConvTranspose, the adjoint of Conv: each
// input element X[n, c, i] adds W[c, m, k]·X[n, c, i] to Y[n, g·M/G + m,
// i·stride − pad + k·dilation] for the output channels m of c's group g.
// Each group is one matrix product (Wᵀ·X) followed by col2im.
func convTransposeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, w, b := in[0], in[1], input(in, 2)
	group, err := checkConvOperands(n, x, w, b)
	if err != nil {
		return nil, err
	}
	channels := x.shape[1]
	if w.shape[0] != channels || channels%group != 0 {
		return nil, fmt.Errorf("weights W %s must have the %d input channels of X first, divisible into %d groups", shapeString(w.shape), channels, group)
	}
	outChannels := w.shape[1] * group
	if err := checkBias(b, outChannels); err != nil {
		return nil, err
	}
	kernel, err := kernelShape(n, w.shape[2:])
	if err != nil {
		return nil, err
	}
	win, err := transposedWindow(n, x.shape[2:], kernel)
	if err != nil {
		return nil, err
	}
	shape := append([]int{x.shape[0], outChannels}, win.image...)
	cs := convShapes{batch: x.shape[0], group: group, inPerGroup: channels / group, outPerGroup: w.shape[1]}
	return convolution(rc, n, shape, cs, win, x, w, b, convolveTransposed[float32], convolveTransposed[float64])
}

// transposedWindow works out ConvTranspose's geometry: its image is the
// output, whose size along each axis is stride·(in − 1) + output_padding +
// (kernel − 1)·dilation + 1 − pads. An output_shape attribute (spatial
// sizes, or the full shape) or auto_pad SAME_* (output in·stride) fixes
// the size instead, and the padding follows from it: split evenly with
// the odd element at the end for SAME_UPPER, at the beginning otherwise.
func transposedWindow(n *node, in, kernel []int) (*window, error) {
	axes := len(in)
	w := &window{out: in, kernel: kernel, image: make([]int, axes)}
	autoPad, err := w.readAttributes(n)
	if err != nil {
		return nil, err
	}
	outPad := make([]int, axes)
	if v, ok := n.attrInts("output_padding"); ok {
		if len(v) != axes {
			return nil, fmt.Errorf("attribute output_padding has %d values for %d spatial axes", len(v), axes)
		}
		for i, p := range v {
			if p < 0 || p > maxDimension {
				return nil, fmt.Errorf("attribute output_padding: value %d must be in [0, %d]", p, maxDimension)
			}
			outPad[i] = int(p)
		}
	}
	var target []int // the output's spatial sizes, when fixed
	switch v, ok := n.attrInts("output_shape"); {
	case ok:
		if len(v) == axes+2 {
			v = v[2:]
		}
		if len(v) != axes {
			return nil, fmt.Errorf("attribute output_shape has %d values for %d spatial axes", len(v), axes)
		}
		for _, d := range v {
			if d < 0 || d > maxDimension {
				return nil, fmt.Errorf("attribute output_shape: size %d must be in [0, %d]", d, maxDimension)
			}
		}
		target = toInts(v)
	case autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER":
		target = make([]int, axes)
		for i, d := range in {
			target[i] = d * w.strides[i]
		}
	}
	for i, d := range in {
		span, err := w.span(i)
		if err != nil {
			return nil, err
		}
		spread := mulSat(w.strides[i], max(d-1, 0))
		if spread > maxDimension {
			return nil, fmt.Errorf("stride %d spreads %d inputs along spatial axis %d over more than %d positions", w.strides[i], d, i, maxDimension)
		}
		full := spread + outPad[i] + span
		if target != nil {
			// The spec's halves round down (Python's //), which matters
			// when the target exceeds the full size and total is negative.
			total := full - target[i]
			half := floorHalf(total)
			w.padBegin[i] = total - half
			if autoPad == "SAME_UPPER" {
				w.padBegin[i] = half
			}
			w.padEnd[i] = total - w.padBegin[i]
		}
		w.image[i] = full - w.padBegin[i] - w.padEnd[i]
		if w.image[i] < 0 {
			return nil, fmt.Errorf("pads %d and %d along spatial axis %d leave a negative output size %d", w.padBegin[i], w.padEnd[i], i, w.image[i])
		}
	}
	return w, nil
}

// floorHalf is a/2 rounded toward negative infinity.
func floorHalf(a int) int {
	if a < 0 {
		return -((1 - a) / 2)
	}
	return a / 2
}

// convolveTransposed computes a transposed convolution into y (zero-filled,
// of shape (N, M, image...)).
func convolveTransposed[T float](rc *runCtx, n *node, cs convShapes, win *window, x, w, bias, y []T) error {
	taps, positions, imageSize := win.taps(), win.positions(), win.imageSize()
	rows := cs.outPerGroup * taps // W's per-group size
	offs, err := allocOffsets(rc, n, win)
	if err != nil {
		return err
	}
	col, err := scratch[T](rc, n, mulSat(rows, positions), "transposed columns")
	if err != nil {
		return err
	}
	return eachGroup(rc, cs, y, bias, imageSize, func(b, g, first, out int) {
		matmulInto(true, rows, positions, cs.inPerGroup,
			w[g*cs.inPerGroup*rows:(g+1)*cs.inPerGroup*rows],
			x[first*positions:(first+cs.inPerGroup)*positions], col)
		col2im(y[out*imageSize:(out+cs.outPerGroup)*imageSize], col, offs, cs.outPerGroup, taps, positions, imageSize)
	})
}

// col2ImOp is the kernel of Col2Im (PyTorch's fold): input (N, C·∏block,
// L) holds L blocks, one per position of the block sliding over the
// image (strides, dilations and pads as for Conv) in row-major order;
// each block element adds into the image element it covers.
func col2ImOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if !x.dtype.IsFloat() {
		return nil, errDType(x, "float32 or float64")
	}
	image, err := ints(rc, n, in[1])
	if err != nil {
		return nil, fmt.Errorf("image_shape: %w", err)
	}
	block, err := ints(rc, n, in[2])
	if err != nil {
		return nil, fmt.Errorf("block_shape: %w", err)
	}
	if len(image) == 0 || len(block) != len(image) {
		return nil, fmt.Errorf("image_shape %v and block_shape %v must have one size per spatial axis", image, block)
	}
	for _, d := range append(append([]int64(nil), image...), block...) {
		if d < 1 || d > maxDimension {
			return nil, fmt.Errorf("image_shape %v and block_shape %v must hold positive sizes", image, block)
		}
	}
	win, err := slidingWindow(n, toInts(image), toInts(block), false)
	if err != nil {
		return nil, err
	}
	taps := win.taps()
	if x.rank() != 3 || x.shape[1]%taps != 0 || x.shape[2] != win.positions() {
		return nil, fmt.Errorf("input %s must be (N, C·%d, %d): %d block elements at %d block positions", shapeString(x.shape), taps, win.positions(), taps, win.positions())
	}
	shape := append([]int{x.shape[0], x.shape[1] / taps}, win.image...)
	y, err := rc.alloc(n, x.dtype, shape)
	if err != nil || y.size() == 0 {
		return oneOrErr(y, err)
	}
	offs, err := allocOffsets(rc, n, win)
	if err != nil {
		return nil, err
	}
	channels := x.shape[0] * shape[1]
	switch d := y.data.(type) {
	case []float32:
		col2im(d, x.data.([]float32), offs, channels, taps, win.positions(), win.imageSize())
	case []float64:
		col2im(d, x.data.([]float64), offs, channels, taps, win.positions(), win.imageSize())
	}
	return one(y)
}

// deformConvOp is the kernel of DeformConv: Conv whose kernel taps sample
// X at positions moved by the offset input, (N, offset_group·K·r, out...)
// with r coordinates per tap (row offset first in 2-D), interpolated
// N-linearly with zeros outside the image, and optionally scaled by the
// mask input (N, offset_group·K, out...). Input channel c uses offset
// group c / (C / offset_group). The sampled columns then multiply the
// weights as in Conv.
func deformConvOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, w, offset, b, mask := in[0], in[1], in[2], input(in, 3), input(in, 4)
	cs, win, err := convWindow(n, x, w, b)
	if err != nil {
		return nil, err
	}
	if err := sameDType([]*value{x, offset, mask}); err != nil {
		return nil, err
	}
	channels := x.shape[1]
	offsetGroups := int(n.attrInt("offset_group", 1))
	if offsetGroups < 1 || channels%offsetGroups != 0 {
		return nil, fmt.Errorf("attribute offset_group %d must divide the %d input channels", offsetGroups, channels)
	}
	axes, taps := len(win.kernel), win.taps()
	wantOffset := append([]int{x.shape[0], offsetGroups * taps * axes}, win.out...)
	if !equalShapes(offset.shape, wantOffset) {
		return nil, fmt.Errorf("offset %s must be %s", shapeString(offset.shape), shapeString(wantOffset))
	}
	if mask != nil {
		if want := append([]int{x.shape[0], offsetGroups * taps}, win.out...); !equalShapes(mask.shape, want) {
			return nil, fmt.Errorf("mask %s must be %s", shapeString(mask.shape), shapeString(want))
		}
	}
	shape := append([]int{x.shape[0], w.shape[0]}, win.out...)
	y, err := rc.alloc(n, x.dtype, shape)
	if err != nil || y.size() == 0 {
		return oneOrErr(y, err)
	}
	dc := deformable{win: win, offsetGroups: offsetGroups, conv: cs}
	if x.dtype == Float32 {
		err = deformConvolve(rc, n, dc, x.data.([]float32), w.data.([]float32), offset.data.([]float32),
			maskData[float32](mask), biasData[float32](b), y.data.([]float32))
	} else {
		err = deformConvolve(rc, n, dc, x.data.([]float64), w.data.([]float64), offset.data.([]float64),
			maskData[float64](mask), biasData[float64](b), y.data.([]float64))
	}
	return oneOrErr(y, err)
}

// maskData returns a mask's elements, or nil when it is omitted.
func maskData[T float](m *value) []T { return biasData[T](m) }

// deformable is DeformConv's geometry.
type deformable struct {
	win          *window
	conv         convShapes
	offsetGroups int
}

// deformConvolve samples the deformed columns of each batch and group and
// multiplies them by the group's weights.
func deformConvolve[T float](rc *runCtx, n *node, dc deformable, x, w, offset, mask, bias, y []T) error {
	win, cs := dc.win, dc.conv
	taps, positions, imageSize, axes := win.taps(), win.positions(), win.imageSize(), len(win.image)
	rows := cs.inPerGroup * taps // W's per-group size
	col, err := scratch[T](rc, n, mulSat(rows, positions), "deformed columns")
	if err != nil {
		return err
	}
	channels := cs.group * cs.inPerGroup
	perOffsetGroup := channels / dc.offsetGroups
	strides := stridesOf(win.image)
	tap, pos := make([]int, axes), make([]int, axes)
	at := make([]float64, axes)
	return eachGroup(rc, cs, y, bias, positions, func(b, g, first, out int) {
		for ci := range cs.inPerGroup {
			ch := g*cs.inPerGroup + ci
			og := ch / perOffsetGroup
			img := x[(first+ci)*imageSize : (first+ci+1)*imageSize]
			clear(tap)
			for t := range taps {
				row := col[(ci*taps+t)*positions : (ci*taps+t+1)*positions]
				clear(pos)
				for o := range row {
					for a := range axes {
						shift := offset[((b*dc.offsetGroups+og)*taps*axes+t*axes+a)*positions+o]
						at[a] = float64(pos[a]*win.strides[a]-win.padBegin[a]+tap[a]*win.dilations[a]) + float64(shift)
					}
					v := sampleLinear(img, win.image, strides, at)
					if mask != nil {
						v *= float64(mask[((b*dc.offsetGroups+og)*taps+t)*positions+o])
					}
					row[o] = T(v)
					odometer(pos, win.out)
				}
				odometer(tap, win.kernel)
			}
		}
		matmulInto(false, cs.outPerGroup, positions, rows,
			w[g*cs.outPerGroup*rows:(g+1)*cs.outPerGroup*rows], col,
			y[out*positions:(out+cs.outPerGroup)*positions])
	})
}

// sampleLinear interpolates an image N-linearly at a fractional position,
// the corners outside the image counting as zero (a NaN position gives
// NaN).
func sampleLinear[T float](img []T, image, strides []int, at []float64) float64 {
	for a, p := range at {
		if math.IsNaN(p) {
			return math.NaN()
		}
		if p <= -1 || p >= float64(image[a]) { // no corner inside
			return 0
		}
	}
	sum := 0.0
	for corner := range 1 << len(at) {
		w, off := 1.0, 0
		for a, p := range at {
			f := math.Floor(p)
			i := int(f)
			if corner>>a&1 == 1 {
				i++
				w *= p - f
			} else {
				w *= 1 - (p - f)
			}
			if i < 0 || i >= image[a] {
				w = 0
				break
			}
			off += i * strides[a]
		}
		if w != 0 {
			sum += w * float64(img[off])
		}
	}
	return sum
}
