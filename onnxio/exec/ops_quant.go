package exec

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/array"
)

// Linear quantization: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear and MatMulInteger, for the 8- and 16-bit integer
// types; QuantizeLinear and DequantizeLinear also for int4, uint4, int2,
// uint2 and the float8 and float4 types (they see their inputs' own
// types: narrow.go's typeAwareOps).
// axis arrived at opset 13, saturate at 19, block_size and output_dtype at
// 21 (DequantizeLinear's output_dtype at 23), precision at 23; later
// versions only added element types.
func init() {
	ops["QuantizeLinear"] = &opSpec{since: 10, minIn: 2, maxIn: 3, minOut: 1, maxOut: 1, run: quantizeOp,
		attrs: map[string]attrKind{"axis": attrInt, "saturate": attrInt, "block_size": attrInt, "output_dtype": attrInt, "precision": attrInt}}
	ops["DequantizeLinear"] = &opSpec{since: 10, minIn: 2, maxIn: 3, minOut: 1, maxOut: 1, run: dequantizeOp,
		attrs: map[string]attrKind{"axis": attrInt, "block_size": attrInt, "output_dtype": attrInt}}
	ops["DynamicQuantizeLinear"] = &opSpec{since: 11, minIn: 1, maxIn: 1, minOut: 3, maxOut: 3, run: dynamicQuantizeOp}
	ops["MatMulInteger"] = &opSpec{since: 10, minIn: 2, maxIn: 4, minOut: 1, maxOut: 1, run: matMulIntegerOp}
}

// quantRange is the saturation range of a quantized integer type.
func quantRange(dt DType) (lo, hi float64, ok bool) {
	switch dt {
	case Uint8:
		return 0, math.MaxUint8, true
	case Int8:
		return math.MinInt8, math.MaxInt8, true
	case Uint16:
		return 0, math.MaxUint16, true
	case Int16:
		return math.MinInt16, math.MaxInt16, true
	case Int4:
		return -8, 7, true
	case Uint4:
		return 0, 15, true
	case Int2:
		return -2, 1, true
	case Uint2:
		return 0, 3, true
	}
	return 0, 0, false
}

// sameParamShape reports whether a zero point fits its scale: the same
// shape, or one element each (ONNX's own tests pair a scalar scale with
// a zero point of shape (1)).
func sameParamShape(zp, scale *value) bool {
	return equalShapes(zp.shape, scale.shape) || zp.size() == 1 && scale.size() == 1
}

// isQuantFloat reports whether dt is a float type tensors are quantized
// to: the float8 types and float4e2m1.
func isQuantFloat(dt DType) bool { return isNarrowFloat(dt) && !isRounded(dt) }

// quantParams resolves which scale (and zero point) element applies to
// each element of x: one for all (per tensor), one per index along axis
// (per axis: a 1-D scale of that axis's length), or one per block of
// block_size indices along axis (blocked: the scale has x's rank).
func quantParams(n *node, x, scale *value) ([]int, error) {
	at := make([]int, x.size())
	if scale.size() == 1 && n.attrInt("block_size", 0) == 0 {
		return at, nil
	}
	axis, err := normalizeAxis(int(n.attrInt("axis", 1)), x.rank())
	if err != nil {
		return nil, err
	}
	if n.opset < 13 {
		return nil, fmt.Errorf("scale of shape %s: per-axis quantization is defined from opset 13 on", shapeString(scale.shape))
	}
	st := stridesOf(x.shape)
	block := int(n.attrInt("block_size", 0))
	switch {
	case block == 0:
		if scale.rank() != 1 || scale.shape[0] != x.shape[axis] {
			return nil, fmt.Errorf("scale of shape %s is neither a scalar nor one per index of axis %d (size %d)", shapeString(scale.shape), axis, x.shape[axis])
		}
		for i := range at {
			at[i] = i / st[axis] % x.shape[axis]
		}
	case block > 0:
		want := make([]int, x.rank())
		copy(want, x.shape)
		want[axis] = (x.shape[axis] + block - 1) / block
		if !equalShapes(scale.shape, want) {
			return nil, fmt.Errorf("scale of shape %s does not block axis %d by %d: want %s", shapeString(scale.shape), axis, block, shapeString(want))
		}
		sst := stridesOf(scale.shape)
		for i := range at {
			off := 0
			for a := range x.shape {
				c := i / st[a] % x.shape[a]
				if a == axis {
					c /= block
				}
				off += c * sst[a]
			}
			at[i] = off
		}
	default:
		return nil, fmt.Errorf("block_size %d is negative", block)
	}
	return at, nil
}

// quantOperands are the elements of a quantization's x, scale and zero
// point (nil when omitted) in float64, and for each element of x the
// index of its scale and zero point.
type quantOperands struct {
	x, scale, zero []float64
	at             []int
}

// readQuantOperands reads the operands of QuantizeLinear and
// DequantizeLinear (see quantParams) and allocates their result, of type
// out and x's shape, for node n.
func readQuantOperands(rc *runCtx, n *node, x, scale, zp *value, out DType) (quantOperands, *value, error) {
	at, err := quantParams(n, x, scale)
	if err != nil {
		return quantOperands{}, nil, err
	}
	res, err := rc.alloc(n, out, x.shape)
	if err != nil {
		return quantOperands{}, nil, err
	}
	ops := quantOperands{x: castTo[float64](x.data), scale: castTo[float64](scale.data), at: at}
	if zp != nil {
		ops.zero = castTo[float64](zp.data)
	}
	return ops, res, nil
}

// params returns the scale and zero point (0 when omitted) of element i.
func (q quantOperands) params(i int) (scale, zero float64) {
	if q.zero != nil {
		zero = q.zero[q.at[i]]
	}
	return q.scale[q.at[i]], zero
}

// quantizeOp is the kernel of QuantizeLinear: y = saturate(round(x /
// scale) + zero_point), rounding half to even, with the division in the
// scale's type (float32 unless it is float64). The output type is the
// zero point's, else output_dtype's, else uint8.
func quantizeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, scale, zp := in[0], in[1], input(in, 2)
	out := Uint8
	if dt := DType(n.attrInt("output_dtype", 0)); dt != 0 {
		out = dt
	}
	if zp != nil {
		if n.has("output_dtype") && zp.dtype != out {
			return nil, fmt.Errorf("output_dtype %s differs from the zero point's %s", out, zp.dtype)
		}
		out = zp.dtype
	}
	lo, hi, ok := quantRange(out)
	if !ok && !isQuantFloat(out) {
		return nil, fmt.Errorf("quantizing to %s is not supported (uint8, int8, uint16, int16, uint4, int4, uint2, int2, float8 or float4 types)", out)
	}
	if !scale.dtype.IsFloat() {
		return nil, errDType(scale, "float32, float64, float16 or bfloat16")
	}
	if zp != nil && !sameParamShape(zp, scale) {
		return nil, fmt.Errorf("zero point of shape %s differs from the scale's %s", shapeString(zp.shape), shapeString(scale.shape))
	}
	ops, res, err := readQuantOperands(rc, n, x, scale, zp, out)
	if err != nil {
		return nil, err
	}
	saturate := n.attrInt("saturate", 1) != 0
	y := make([]float64, len(ops.x))
	for i, v := range ops.x {
		s, z := ops.params(i)
		q := v / s
		if scale.dtype != Float64 { // float32 arithmetic, as ONNX Runtime's
			q = float64(float32(v) / float32(s))
		}
		if !isQuantFloat(out) { // float types take Cast's rules, no rounding to an integer
			q = math.RoundToEven(q)
		}
		if ops.zero != nil { // without one, -0 stays -0
			q += z
		}
		if isQuantFloat(out) {
			res.data.([]float32)[i] = array.RoundFloat(array.DType(out), q, saturate)
			continue
		}
		y[i] = min(max(q, lo), hi)
		if q != q { // NaN quantizes to 0
			y[i] = 0
		}
	}
	if !isQuantFloat(out) {
		convertData(res.data, y)
	}
	return one(res)
}

// dequantizeOp is the kernel of DequantizeLinear: y = (x - zero_point) ·
// scale, computed in the output type (the scale's, or output_dtype).
// int32 inputs take no zero point.
func dequantizeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, scale, zp := in[0], in[1], input(in, 2)
	if _, _, ok := quantRange(x.dtype); !ok && x.dtype != Int32 && !isQuantFloat(x.dtype) {
		return nil, errDType(x, "uint8, int8, uint16, int16, int32, uint4, int4, uint2, int2, a float8 type or float4e2m1")
	}
	if !scale.dtype.IsFloat() || isQuantFloat(scale.dtype) {
		return nil, errDType(scale, "float32, float64, float16 or bfloat16")
	}
	out := scale.dtype
	if dt := DType(n.attrInt("output_dtype", 0)); dt != 0 {
		if !dt.IsFloat() || isQuantFloat(dt) {
			return nil, fmt.Errorf("output_dtype %s is not supported (float32, float64, float16 or bfloat16)", dt)
		}
		out = dt
	}
	if zp != nil && (zp.dtype != x.dtype || !sameParamShape(zp, scale)) {
		return nil, fmt.Errorf("zero point %s must have x's type %s and the scale's shape %s", zp.describe(), x.dtype, shapeString(scale.shape))
	}
	ops, res, err := readQuantOperands(rc, n, x, scale, zp, out)
	if err != nil {
		return nil, err
	}
	y := make([]float64, len(ops.x))
	for i, v := range ops.x {
		s, z := ops.params(i)
		if out != Float64 { // float32 arithmetic; runNode rounds float16 results
			y[i] = float64(float32(v-z) * float32(s))
		} else {
			y[i] = (v - z) * s
		}
	}
	convertData(res.data, y)
	return one(res)
}

// dynamicQuantizeOp is the kernel of DynamicQuantizeLinear: uint8
// quantization of a float32 tensor with the scale and zero point that map
// [min(0, min x), max(0, max x)] onto [0, 255], in float32 arithmetic as
// the spec's reference.
func dynamicQuantizeOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	if x.dtype != Float32 {
		return nil, errDType(x, "float32")
	}
	xs := x.data.([]float32)
	var hi, lo float32
	for _, v := range xs {
		hi, lo = max(hi, v), min(lo, v)
	}
	scale := float32(1)
	if hi != lo {
		scale = hi - lo
	}
	scale /= 255
	zp := float32(math.RoundToEven(float64(min(max(0-lo/scale, 0), 255))))
	y, err := rc.alloc(n, Uint8, x.shape)
	if err != nil {
		return nil, err
	}
	ys := y.data.([]uint8)
	for i, v := range xs {
		q := float32(math.RoundToEven(float64(v/scale))) + zp
		ys[i] = uint8(min(max(q, 0), 255))
	}
	return []*value{y, scalarOf(scale), scalarOf(uint8(zp))}, nil
}

// matMulIntegerOp is the kernel of MatMulInteger: MatMul of (A -
// a_zero_point) and (B - b_zero_point) in int32, for 8-bit A and B. A's
// zero point is a scalar or one per row of A; B's a scalar or one per
// column of B.
func matMulIntegerOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	a, b := in[0], in[1]
	for _, v := range []*value{a, b} {
		if v.dtype != Uint8 && v.dtype != Int8 {
			return nil, errDType(v, "uint8 or int8")
		}
	}
	if a.rank() < 1 || b.rank() < 1 {
		return nil, fmt.Errorf("inputs A and B must have rank >= 1")
	}
	az, err := zeroPoints(input(in, 2), a, a.rank()-2, "a_zero_point")
	if err != nil {
		return nil, err
	}
	bz, err := zeroPoints(input(in, 3), b, b.rank()-1, "b_zero_point")
	if err != nil {
		return nil, err
	}
	a32, err := shifted(rc, n, a, az, a.rank()-2)
	if err != nil {
		return nil, err
	}
	b32, err := shifted(rc, n, b, bz, b.rank()-1)
	if err != nil {
		return nil, err
	}
	return matmulOp(rc, n, []*value{a32, b32})
}

// zeroPoints reads an optional zero point of x's type: nil, a scalar, or
// one per index of axis (rows of A, columns of B).
func zeroPoints(zp, x *value, axis int, name string) ([]int32, error) {
	if zp == nil {
		return nil, nil
	}
	if zp.dtype != x.dtype {
		return nil, fmt.Errorf("%s is %s, want %s like its matrix", name, zp.dtype, x.dtype)
	}
	if zp.size() != 1 && (axis < 0 || zp.size() != x.shape[axis]) {
		return nil, fmt.Errorf("%s of shape %s is neither a scalar nor one per index of axis %d", name, shapeString(zp.shape), axis)
	}
	return castTo[int32](zp.data), nil
}

// shifted returns x - zp as int32, zp broadcast along axis.
func shifted(rc *runCtx, n *node, x *value, zp []int32, axis int) (*value, error) {
	out, err := rc.alloc(n, Int32, x.shape)
	if err != nil {
		return nil, err
	}
	o := out.data.([]int32)
	copy(o, castTo[int32](x.data))
	if zp == nil {
		return out, nil
	}
	if len(zp) == 1 {
		for i := range o {
			o[i] -= zp[0]
		}
		return out, nil
	}
	st := stridesOf(x.shape)
	for i := range o {
		o[i] -= zp[i/st[axis]%x.shape[axis]]
	}
	return out, nil
}
