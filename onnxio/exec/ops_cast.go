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
	return one(castValue(in[0], to))
}

// castValue converts v to type to; a value already of that type is
// returned as is.
func castValue(v *value, to DType) *value {
	if v.dtype == to {
		return v
	}
	return &value{dtype: to, shape: v.shape, data: castData(v.data, to)}
}

// castData converts a data slice to a new slice of type to.
func castData(data any, to DType) any {
	switch to {
	case Float32:
		return castTo[float32](data)
	case Float64:
		return castTo[float64](data)
	case Int64:
		return castTo[int64](data)
	case Int32:
		return castTo[int32](data)
	case Int16:
		return castTo[int16](data)
	case Int8:
		return castTo[int8](data)
	case Uint64:
		return castTo[uint64](data)
	case Uint32:
		return castTo[uint32](data)
	case Uint16:
		return castTo[uint16](data)
	case Uint8:
		return castTo[uint8](data)
	case Bool:
		return castToBool(data)
	}
	panic(fmt.Sprintf("exec: cast to unsupported %s", to))
}

// castTo converts any data slice to numeric type D.
func castTo[D number](data any) []D {
	switch s := data.(type) {
	case []float32:
		return convert[float32, D](s)
	case []float64:
		return convert[float64, D](s)
	case []int64:
		return convert[int64, D](s)
	case []int32:
		return convert[int32, D](s)
	case []int16:
		return convert[int16, D](s)
	case []int8:
		return convert[int8, D](s)
	case []uint64:
		return convert[uint64, D](s)
	case []uint32:
		return convert[uint32, D](s)
	case []uint16:
		return convert[uint16, D](s)
	case []uint8:
		return convert[uint8, D](s)
	case []bool:
		o := make([]D, len(s))
		for i, b := range s {
			if b {
				o[i] = 1
			}
		}
		return o
	}
	panic(fmt.Sprintf("exec: cast from %T", data))
}

// convert converts each element with Go's conversion, which truncates
// floats toward zero.
func convert[S, D number](s []S) []D {
	o := make([]D, len(s))
	for i, x := range s {
		o[i] = D(x)
	}
	return o
}

// castToBool converts any data slice to bool: nonzero is true.
func castToBool(data any) []bool {
	switch s := data.(type) {
	case []bool:
		return append([]bool(nil), s...)
	case []float32:
		return nonzero(s)
	case []float64:
		return nonzero(s)
	}
	f := castTo[float64](data) // integers are exactly zero or not in float64
	return nonzero(f)
}

// nonzero maps each element to whether it is nonzero (NaN is).
func nonzero[S number](s []S) []bool {
	o := make([]bool, len(s))
	for i, x := range s {
		o[i] = x != 0
	}
	return o
}

// ints returns the elements of an integer tensor (shape inputs, axes,
// indices) as int64.
func ints(v *value) ([]int64, error) {
	switch v.dtype {
	case Int64:
		return v.data.([]int64), nil
	case Int32, Int16, Int8, Uint32, Uint16, Uint8:
		return castTo[int64](v.data), nil
	}
	return nil, errDType(v, "int64 or int32")
}
