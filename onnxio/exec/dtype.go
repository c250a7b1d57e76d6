package exec

import (
	"fmt"
	"strings"
)

// DType is the element type of a tensor in a graph. Its values are ONNX's
// TensorProto.DataType codes, so attribute and proto fields convert directly.
type DType int32

// The element types the executor computes with. Float16, bfloat16, string
// and complex tensors are refused when a graph is prepared.
const (
	Float32 DType = 1
	Uint8   DType = 2
	Int8    DType = 3
	Uint16  DType = 4
	Int16   DType = 5
	Int32   DType = 6
	Int64   DType = 7
	Bool    DType = 9
	Float64 DType = 11
	Uint32  DType = 12
	Uint64  DType = 13
)

// onnxTypeNames names every ONNX data type code, supported or not, so that
// errors about a float16 input say "float16" rather than a number.
var onnxTypeNames = map[DType]string{
	0: "undefined", 1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16",
	6: "int32", 7: "int64", 8: "string", 9: "bool", 10: "float16", 11: "float64",
	12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128", 16: "bfloat16",
	17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz",
	21: "uint4", 22: "int4", 23: "float4e2m1", 24: "float8e8m0", 25: "uint2", 26: "int2",
}

// supportedDTypes lists the element types in the order errors show them.
var supportedDTypes = []DType{Float32, Float64, Int64, Int32, Int16, Int8, Uint64, Uint32, Uint16, Uint8, Bool}

// String returns the Go-style name of the type ("float32", "int64", "bool").
func (d DType) String() string {
	if name, ok := onnxTypeNames[d]; ok {
		return name
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// Supported reports whether the executor computes with tensors of this type.
func (d DType) Supported() bool {
	for _, s := range supportedDTypes {
		if d == s {
			return true
		}
	}
	return false
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return d == Float32 || d == Float64 }

// isNumeric reports whether d supports arithmetic (every supported type but bool).
func (d DType) isNumeric() bool { return d.Supported() && d != Bool }

// checkDType returns an error unless d is supported.
func checkDType(d DType) error {
	if d.Supported() {
		return nil
	}
	names := make([]string, len(supportedDTypes))
	for i, s := range supportedDTypes {
		names[i] = s.String()
	}
	return fmt.Errorf("dtype %s is not supported (supported: %s)", d, strings.Join(names, ", "))
}

// integer, float and number are the element type sets generic kernels use.
type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

type float interface{ ~float32 | ~float64 }

type number interface{ integer | float }

// element is every Go type a tensor's data can hold.
type element interface{ number | ~bool }

// size is the number of bytes one element takes in memory while the graph
// runs (bool is one byte, as Go stores it).
func (d DType) size() int {
	if t, ok := goTypes[d]; ok {
		return int(t.Size())
	}
	return 0
}
