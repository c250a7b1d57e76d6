package exec

import (
	"fmt"

	"github.com/attnrun/attnrun/array"
)

// castOp is the kernel of Cast. Conversions follow numpy's astype, which
// the ONNX reference uses: floats to integers truncate toward zero, any
// nonzero (and NaN) is true, true is 1; to float16 and bfloat16 they
// round to nearest, ties to even, from the source's own precision.
func castOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	to := DType(n.attrInt("to", 0))
	if err := checkDType(to); err != nil {
		return nil, fmt.Errorf("cast to %w", err)
	}
	return oneOrErr(cast(rc, n, in[0], to))
}

// cast converts v to type to in a new value allocated for node n; a value
// already of that type is returned as is. n's saturate attribute applies
// to the float8 types, its round_mode to float8e8m0.
func cast(rc *runCtx, n *node, v *value, to DType) (*value, error) {
	if v.dtype == to {
		return v, nil
	}
	out, err := rc.allocFull(n, to, v.shape) // every element is cast
	if err != nil {
		return nil, err
	}
	saturate := n.attrInt("saturate", 1) != 0
	if to == Float8E8M0 {
		mode, err := roundMode(n.attrString("round_mode", "up"))
		if err != nil {
			return nil, err
		}
		dst, src := out.data.([]float32), castTo[float64](v.data)
		for i, x := range src {
			dst[i] = array.RoundE8M0(x, saturate, mode)
		}
		return out, nil
	}
	castData(out, v.data, saturate)
	return out, nil
}

// roundMode reads Cast's round_mode attribute.
func roundMode(s string) (array.RoundMode, error) {
	switch s {
	case "up":
		return array.RoundUp, nil
	case "down":
		return array.RoundDown, nil
	case "nearest":
		return array.RoundNearest, nil
	}
	return 0, fmt.Errorf("round_mode %q is not one of up, down, nearest", s)
}

// castValue converts v to type to outside any budget, for values of a few
// elements (attributes, scalars) and for tests; a value already of that
// type is returned as is.
func castValue(v *value, to DType) *value {
	if v.dtype == to {
		return v
	}
	out := newValue(to, v.shape)
	castData(out, v.data, true)
	return out
}

// castData converts the elements of src into out's data. A narrow float
// target is rounded from each element's own value, so that a float64 is
// rounded once, not first to float32; saturate is Cast's attribute for
// the float8 types.
func castData(out *value, src any, saturate bool) {
	if bits := array.DType(out.dtype).Bits(); array.DType(out.dtype).IsInteger() && bits < 8 {
		// The 4- and 2-bit integers keep the low bits of the integer,
		// as ONNX's reference packs them: 9 is -7 in int4 and 9 in
		// uint4, -9 is 7 in both.
		convertData(out.data, castTo[int64](src))
		wrapInts(out.data, bits)
		return
	}
	if !isNarrowFloat(out.dtype) {
		convertData(out.data, src)
		return
	}
	dst := out.data.([]float32)
	if k := numKindOfData(src); k != nil {
		k.roundFrom(dst, src, array.DType(out.dtype), saturate)
	} else { // bool: 0 and 1 are values of every type
		convertTo(dst, src)
	}
}

// wrapInts keeps the low bits of each element of data: of an []int8
// sign-extended, of an []uint8 not.
func wrapInts(data any, bits int) {
	switch d := data.(type) {
	case []int8:
		for i, x := range d {
			d[i] = x << (8 - bits) >> (8 - bits)
		}
	case []uint8:
		for i, x := range d {
			d[i] = x & (1<<bits - 1)
		}
	}
}

// roundFrom rounds each element of src, of type T, through float64 (which
// holds every float32 and every integer to 2^53 exactly), to type dt.
func (numOf[T]) roundFrom(dst []float32, src any, dt array.DType, saturate bool) {
	for i, x := range src.([]T) {
		dst[i] = array.RoundFloat(dt, float64(x), saturate)
	}
}

// castTo converts any data slice to a new slice of numeric type D, outside
// any budget: for shape inputs, scalars and tests.
func castTo[D number](data any) []D {
	o := make([]D, sliceLen(data))
	convertTo(o, data)
	return o
}

// convertData converts the elements of src into dst, a slice of the same
// length and any supported element type.
func convertData(dst, src any) {
	if d, ok := dst.([]bool); ok {
		convertToBool(d, src)
	} else {
		numKindOfData(dst).convertFrom(dst, src)
	}
}

// convertFrom converts src into dst, of type T.
func (numOf[T]) convertFrom(dst, src any) { convertTo(dst.([]T), src) }

// convertTo converts any data slice into dst, of numeric type D.
func convertTo[D number](dst []D, data any) {
	switch s := data.(type) {
	case []float32:
		convertInto(dst, s)
	case []float64:
		convertInto(dst, s)
	case []int64:
		convertInto(dst, s)
	case []int32:
		convertInto(dst, s)
	case []int16:
		convertInto(dst, s)
	case []int8:
		convertInto(dst, s)
	case []uint64:
		convertInto(dst, s)
	case []uint32:
		convertInto(dst, s)
	case []uint16:
		convertInto(dst, s)
	case []uint8:
		convertInto(dst, s)
	case []bool:
		for i, b := range s {
			dst[i] = 0
			if b {
				dst[i] = 1
			}
		}
	default:
		panic(fmt.Sprintf("exec: cast from %T", data))
	}
}

// convertInto converts each element of s into dst with Go's conversion,
// which truncates floats toward zero.
func convertInto[S, D number](dst []D, s []S) {
	for i, x := range s {
		dst[i] = D(x)
	}
}

// convert returns the elements of s converted as convertInto does, in a
// new slice outside any budget (for tests).
func convert[S, D number](s []S) []D {
	o := make([]D, len(s))
	convertInto(o, s)
	return o
}

// convertToBool converts any data slice into dst: nonzero (and NaN) is
// true.
func convertToBool(dst []bool, data any) {
	if s, ok := data.([]bool); ok {
		copy(dst, s)
	} else {
		numKindOfData(data).nonzero(dst, data)
	}
}

// nonzero maps each element of src, of type T, to whether it is nonzero
// (NaN is).
func (numOf[T]) nonzero(dst []bool, src any) {
	for i, x := range src.([]T) {
		dst[i] = x != 0
	}
}

// ints returns the elements of an integer tensor (shape inputs, axes,
// indices) as int64. An int64 tensor is returned in place; others are
// converted into a slice reserved for node n.
func ints(rc *runCtx, n *node, v *value) ([]int64, error) {
	switch v.dtype {
	case Int64:
		return v.data.([]int64), nil
	case Int32, Int16, Int8, Uint32, Uint16, Uint8:
		o, err := scratch[int64](rc, n, v.size(), "indices as int64")
		if err != nil {
			return nil, err
		}
		convertTo(o, v.data)
		return o, nil
	}
	return nil, errDType(v, "int64 or int32")
}
