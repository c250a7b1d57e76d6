package array

import (
	"fmt"
	"math"
	"reflect"
)

// DType is the element type of an Array. Its values are ONNX's
// TensorProto.DataType codes, so that file fields, attributes and the
// executor's types convert with a plain conversion. It is attnrun's one
// table of element types: the ONNX codec, the executor and the .npy
// readers refer to it.
type DType int32

// The element types, with their ONNX codes.
const (
	Undefined      DType = 0
	Float32        DType = 1
	Uint8          DType = 2
	Int8           DType = 3
	Uint16         DType = 4
	Int16          DType = 5
	Int32          DType = 6
	Int64          DType = 7
	String         DType = 8
	Bool           DType = 9
	Float16        DType = 10
	Float64        DType = 11
	Uint32         DType = 12
	Uint64         DType = 13
	Complex64      DType = 14
	Complex128     DType = 15
	BFloat16       DType = 16
	Float8E4M3FN   DType = 17
	Float8E4M3FNUZ DType = 18
	Float8E5M2     DType = 19
	Float8E5M2FNUZ DType = 20
	Uint4          DType = 21
	Int4           DType = 22
	Float4E2M1     DType = 23
	Float8E8M0     DType = 24
	Uint2          DType = 25
	Int2           DType = 26
)

// dtypeInfo is what the table knows of one element type.
type dtypeInfo struct {
	name string
	// bits is the size of one element in a file (ONNX raw_data, .npy).
	bits int
	// storage is the Go type an Array's Data holds the elements in, nil
	// when an Array cannot hold the type. The narrow floats are widened
	// exactly to float32 and the sub-byte integers to int8 or uint8.
	storage reflect.Type
}

var (
	f32 = reflect.TypeFor[float32]()
	i8  = reflect.TypeFor[int8]()
	u8  = reflect.TypeFor[uint8]()
)

// dtypes is indexed by DType.
var dtypes = [...]dtypeInfo{
	Undefined:      {"undefined", 0, nil},
	Float32:        {"float32", 32, f32},
	Uint8:          {"uint8", 8, u8},
	Int8:           {"int8", 8, i8},
	Uint16:         {"uint16", 16, reflect.TypeFor[uint16]()},
	Int16:          {"int16", 16, reflect.TypeFor[int16]()},
	Int32:          {"int32", 32, reflect.TypeFor[int32]()},
	Int64:          {"int64", 64, reflect.TypeFor[int64]()},
	String:         {"string", 0, nil},
	Bool:           {"bool", 8, reflect.TypeFor[bool]()},
	Float16:        {"float16", 16, f32},
	Float64:        {"float64", 64, reflect.TypeFor[float64]()},
	Uint32:         {"uint32", 32, reflect.TypeFor[uint32]()},
	Uint64:         {"uint64", 64, reflect.TypeFor[uint64]()},
	Complex64:      {"complex64", 64, nil},
	Complex128:     {"complex128", 128, nil},
	BFloat16:       {"bfloat16", 16, f32},
	Float8E4M3FN:   {"float8e4m3fn", 8, f32},
	Float8E4M3FNUZ: {"float8e4m3fnuz", 8, f32},
	Float8E5M2:     {"float8e5m2", 8, f32},
	Float8E5M2FNUZ: {"float8e5m2fnuz", 8, f32},
	Uint4:          {"uint4", 4, u8},
	Int4:           {"int4", 4, i8},
	Float4E2M1:     {"float4e2m1", 4, f32},
	Float8E8M0:     {"float8e8m0", 8, f32},
	Uint2:          {"uint2", 2, u8},
	Int2:           {"int2", 2, i8},
}

// info returns the table entry of d; the zero entry for codes outside it.
func (d DType) info() dtypeInfo {
	if d < 0 || int(d) >= len(dtypes) {
		return dtypeInfo{}
	}
	return dtypes[d]
}

// String returns the name NumPy and PyTorch use ("float32", "int64",
// "bfloat16", "float8e4m3fn"), or "dtype(N)" for a code ONNX does not
// define.
func (d DType) String() string {
	if name := d.info().name; name != "" {
		return name
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// Bits is the size of one element in a file: ONNX raw_data packs 4-bit
// and 2-bit types two and four to a byte. It is 0 for strings and for
// codes ONNX does not define.
func (d DType) Bits() int { return d.info().bits }

// Storable reports whether an Array can hold elements of type d: every
// numeric ONNX type and bool; not strings nor complex numbers.
func (d DType) Storable() bool { return d.info().storage != nil }

// Storage is the Go element type of an Array's Data for type d (float32
// for float16), or nil when an Array cannot hold d.
func (d DType) Storage() reflect.Type { return d.info().storage }

// Size is the number of bytes one element takes in an Array's Data (4
// for float16, which is held widened to float32), or 0 when an Array
// cannot hold d.
func (d DType) Size() int {
	if t := d.info().storage; t != nil {
		return int(t.Size())
	}
	return 0
}

// IsFloat reports whether d is a floating-point type, of any width.
func (d DType) IsFloat() bool {
	switch d {
	case Float32, Float64, Float16, BFloat16, Float8E4M3FN, Float8E4M3FNUZ,
		Float8E5M2, Float8E5M2FNUZ, Float4E2M1, Float8E8M0:
		return true
	}
	return false
}

// Epsilon is the gap between 1 and the next larger value of floating-point
// type d (2^-23 for float32, 2^-10 for float16, 2^-7 for bfloat16, 1 for
// float8e8m0, which holds powers of two): one rounding of a result of
// magnitude 1 moves it by up to half of it. It is 0 for other types.
func (d DType) Epsilon() float64 {
	mant := map[DType]int{Float32: 23, Float64: 52, Float16: 10, BFloat16: 7, Float8E4M3FN: 3, Float8E4M3FNUZ: 3,
		Float8E5M2: 2, Float8E5M2FNUZ: 2, Float4E2M1: 1, Float8E8M0: 0}
	if m, ok := mant[d]; ok {
		return math.Ldexp(1, -m)
	}
	return 0
}

// IsInteger reports whether d is a signed or unsigned integer type, of
// any width.
func (d DType) IsInteger() bool {
	switch d {
	case Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64, Int4, Uint4, Int2, Uint2:
		return true
	}
	return false
}

// IsNarrow reports whether d is held in a wider Go type than its own:
// the floats narrower than float32 (held as float32) and the 4- and 2-bit
// integers (held as int8 or uint8). Values of these types are always ones
// the narrow type can represent.
func (d DType) IsNarrow() bool {
	return d.Storable() && d.Bits() < 8*d.Size()
}

// Of returns the element type whose storage is the Go type of data's
// elements, preferring the full-width type (float32 for []float32, int8
// for []int8), or Undefined when data is not such a slice.
func Of(data any) DType {
	switch data.(type) {
	case []float32:
		return Float32
	case []float64:
		return Float64
	case []int64:
		return Int64
	case []int32:
		return Int32
	case []int16:
		return Int16
	case []int8:
		return Int8
	case []uint64:
		return Uint64
	case []uint32:
		return Uint32
	case []uint16:
		return Uint16
	case []uint8:
		return Uint8
	case []bool:
		return Bool
	}
	return Undefined
}

// StorableTypes lists every element type an Array can hold, in code order.
func StorableTypes() []DType {
	var out []DType
	for d := range dtypes {
		if DType(d).Storable() {
			out = append(out, DType(d))
		}
	}
	return out
}
