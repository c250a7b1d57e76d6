package exec

import "fmt"

// castOp is the kernel of Cast. Conversions follow numpy's astype, which
// the ONNX reference uses: floats to integers truncate toward zero, any
// nonzero (and NaN) is true, true is 1.
func castOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	to := DType(n.attrInt("to", 0))
	if err := checkDType(to); err != nil {
		return nil, fmt.Errorf("cast to %w", err)
	}
	return oneOrErr(cast(rc, n, in[0], to))
}

// cast converts v to type to in a new value allocated for node n; a value
// already of that type is returned as is.
func cast(rc *runCtx, n *node, v *value, to DType) (*value, error) {
	if v.dtype == to {
		return v, nil
	}
	out, err := rc.alloc(n, to, v.shape)
	if err != nil {
		return nil, err
	}
	convertData(out.data, v.data)
	return out, nil
}

// castValue converts v to type to outside any budget, for values of a few
// elements (attributes, scalars) and for tests; a value already of that
// type is returned as is.
func castValue(v *value, to DType) *value {
	if v.dtype == to {
		return v
	}
	out := newValue(to, v.shape)
	convertData(out.data, v.data)
	return out
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
	switch d := dst.(type) {
	case []float32:
		convertTo(d, src)
	case []float64:
		convertTo(d, src)
	case []int64:
		convertTo(d, src)
	case []int32:
		convertTo(d, src)
	case []int16:
		convertTo(d, src)
	case []int8:
		convertTo(d, src)
	case []uint64:
		convertTo(d, src)
	case []uint32:
		convertTo(d, src)
	case []uint16:
		convertTo(d, src)
	case []uint8:
		convertTo(d, src)
	case []bool:
		convertToBool(d, src)
	default:
		panic(fmt.Sprintf("exec: cast to %T", dst))
	}
}

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
	switch s := data.(type) {
	case []bool:
		copy(dst, s)
	case []float32:
		nonzero(dst, s)
	case []float64:
		nonzero(dst, s)
	case []int64:
		nonzero(dst, s)
	case []int32:
		nonzero(dst, s)
	case []int16:
		nonzero(dst, s)
	case []int8:
		nonzero(dst, s)
	case []uint64:
		nonzero(dst, s)
	case []uint32:
		nonzero(dst, s)
	case []uint16:
		nonzero(dst, s)
	case []uint8:
		nonzero(dst, s)
	default:
		panic(fmt.Sprintf("exec: cast from %T", data))
	}
}

// nonzero maps each element to whether it is nonzero (NaN is).
func nonzero[S number](dst []bool, s []S) {
	for i, x := range s {
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
