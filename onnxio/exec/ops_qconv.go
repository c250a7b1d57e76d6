package exec

import (
	"fmt"
	"math"
)

// ConvInteger and QLinearConv (opset 10): Conv on 8-bit tensors with zero
// points, accumulated exactly (in float64, which holds every sum of
// 8-bit products a tensor that fits in memory can make).
func init() {
	convAttrs := map[string]attrKind{"auto_pad": attrString, "dilations": attrInts, "group": attrInt,
		"kernel_shape": attrInts, "pads": attrInts, "strides": attrInts}
	ops["ConvInteger"] = &opSpec{since: 10, minIn: 2, maxIn: 4, minOut: 1, maxOut: 1, run: convIntegerOp, attrs: convAttrs}
	ops["QLinearConv"] = &opSpec{since: 10, minIn: 8, maxIn: 9, minOut: 1, maxOut: 1, run: qLinearConvOp, attrs: convAttrs}
}

// convIntegerOp is the kernel of ConvInteger: the int32 convolution of
// x − x_zero_point with w − w_zero_point (one zero point, or one per
// output channel); padding holds the zero point, so it adds nothing.
func convIntegerOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	acc, err := zeroPointConv(rc, n, in[0], presentInput(in, 2), in[1], presentInput(in, 3))
	if err != nil {
		return nil, err
	}
	y, err := rc.alloc(n, Int32, acc.shape)
	if err != nil {
		return nil, err
	}
	convertData(y.data, acc.data)
	return one(y)
}

// qLinearConvOp is the kernel of QLinearConv: the convolution of the
// dequantized x and w plus the int32 bias B, requantized to y's scale and
// zero point: saturate(round((Σ + B)·x_scale·w_scale/y_scale) + y_zero_point),
// rounding half to even in float32 as ONNX Runtime does; w_scale and
// w_zero_point may hold one value per output channel.
func qLinearConvOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, w, yZero, bias := in[0], in[3], in[7], input(in, 8)
	acc, err := zeroPointConv(rc, n, x, in[2], w, in[5])
	if err != nil {
		return nil, err
	}
	channels, planeSize := acc.shape[1], numel(acc.shape[2:])
	xScale, err := quantParam(in[1], 1, "x_scale")
	if err != nil {
		return nil, err
	}
	wScale, err := quantParam(in[4], channels, "w_scale")
	if err != nil {
		return nil, err
	}
	yScale, err := quantParam(in[6], 1, "y_scale")
	if err != nil {
		return nil, err
	}
	if yZero.size() != 1 || (yZero.dtype != Uint8 && yZero.dtype != Int8) {
		return nil, fmt.Errorf("y_zero_point %s must be one uint8 or int8", yZero.describe())
	}
	var b []int64
	if bias != nil {
		if bias.dtype != Int32 || bias.rank() != 1 || bias.shape[0] != channels {
			return nil, fmt.Errorf("bias B %s must be int32 (%d,)", bias.describe(), channels)
		}
		b = castTo[int64](bias.data)
	}
	lo, hi := 0.0, 255.0
	if yZero.dtype == Int8 {
		lo, hi = -128, 127
	}
	zero := castTo[float64](yZero.data)[0]
	sums := acc.data.([]float64)
	q, err := scratch[float64](rc, n, len(sums), "requantized sums")
	if err != nil {
		return nil, err
	}
	for i, s := range sums {
		m := i / planeSize % channels
		if b != nil {
			s += float64(b[m])
		}
		scale := float32(xScale[0]) * float32(wScale[min(m, len(wScale)-1)]) / float32(yScale[0])
		v := math.RoundToEven(float64(float32(s)*scale)) + zero
		q[i] = min(max(v, lo), hi)
	}
	y, err := rc.alloc(n, yZero.dtype, acc.shape)
	if err != nil {
		return nil, err
	}
	convertData(y.data, q)
	return one(y)
}

// quantParam reads a scale of one element or, when perChannel > 1, of
// perChannel elements.
func quantParam(v *value, perChannel int, name string) ([]float64, error) {
	if !v.dtype.IsFloat() || (v.size() != 1 && v.size() != perChannel) {
		return nil, fmt.Errorf("%s %s must be one float or one per output channel (%d)", name, v.describe(), perChannel)
	}
	return castTo[float64](v.data), nil
}

// zeroPointConv runs Conv on x − xZero and w − wZero (one zero point, or
// one per output channel) in float64 and returns the float64 result.
func zeroPointConv(rc *runCtx, n *node, x, xZero, w, wZero *value) (*value, error) {
	for _, v := range []*value{x, w} {
		if v.dtype != Uint8 && v.dtype != Int8 {
			return nil, errDType(v, "uint8 or int8")
		}
	}
	if w.rank() < 1 {
		return nil, fmt.Errorf("weights W %s must be (M, C/group, k...)", shapeString(w.shape))
	}
	xs, err := minusZeroPoint(rc, n, x, xZero, 1, "x_zero_point")
	if err != nil {
		return nil, err
	}
	ws, err := minusZeroPoint(rc, n, w, wZero, w.shape[0], "w_zero_point")
	if err != nil {
		return nil, err
	}
	out, err := convOp(rc, n, []*value{xs, ws})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// minusZeroPoint returns v − zero as float64, zero being omitted (0), one
// element of v's type, or one per slice of v's first axis when groups > 1.
func minusZeroPoint(rc *runCtx, n *node, v, zero *value, groups int, name string) (*value, error) {
	zeros := []float64{0}
	if zero != nil {
		if zero.dtype != v.dtype || (zero.size() != 1 && zero.size() != groups) {
			return nil, fmt.Errorf("%s %s must be one %s or one per output channel (%d)", name, zero.describe(), v.dtype, groups)
		}
		zeros = castTo[float64](zero.data)
	}
	out, err := rc.alloc(n, Float64, v.shape)
	if err != nil {
		return nil, err
	}
	convertData(out.data, v.data)
	d := out.data.([]float64)
	per := max(len(d)/max(groups, 1), 1)
	for i := range d {
		d[i] -= zeros[min(i/per, len(zeros)-1)]
	}
	return out, nil
}
