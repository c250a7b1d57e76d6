package exec

import (
	"fmt"
	"strings"

	"github.com/attnrun/attnrun/array"
)

// DType is the element type of a tensor in a graph. Its values are ONNX's
// TensorProto.DataType codes, those of array.DType, so attribute and proto
// fields convert directly.
type DType array.DType

// The element types the executor computes with. Float16 and BFloat16
// values are held widened to float32 and computed in float32; every op
// result of those types is rounded to its type, as if stored (narrow.go).
// String and complex tensors are refused when a graph is prepared.
const (
	Float32  = DType(array.Float32)
	Uint8    = DType(array.Uint8)
	Int8     = DType(array.Int8)
	Uint16   = DType(array.Uint16)
	Int16    = DType(array.Int16)
	Int32    = DType(array.Int32)
	Int64    = DType(array.Int64)
	Bool     = DType(array.Bool)
	Float16  = DType(array.Float16)
	Float64  = DType(array.Float64)
	Uint32   = DType(array.Uint32)
	Uint64   = DType(array.Uint64)
	BFloat16 = DType(array.BFloat16)

	// The element types of quantized tensors. Cast, QuantizeLinear and
	// DequantizeLinear convert to and from them; other ops move them
	// (Reshape, Concat, Gather, ...) without computing with them. The
	// floats are held as float32, the integers as int8 or uint8 (package
	// array).
	Float8E4M3FN   = DType(array.Float8E4M3FN)
	Float8E4M3FNUZ = DType(array.Float8E4M3FNUZ)
	Float8E5M2     = DType(array.Float8E5M2)
	Float8E5M2FNUZ = DType(array.Float8E5M2FNUZ)
	Float8E8M0     = DType(array.Float8E8M0)
	Float4E2M1     = DType(array.Float4E2M1)
	Int4           = DType(array.Int4)
	Uint4          = DType(array.Uint4)
	Int2           = DType(array.Int2)
	Uint2          = DType(array.Uint2)
)

// supportedDTypes lists the element types in the order errors show them.
var supportedDTypes = []DType{Float32, Float64, Float16, BFloat16, Int64, Int32, Int16, Int8, Uint64, Uint32, Uint16, Uint8, Bool,
	Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0, Float4E2M1, Int4, Uint4, Int2, Uint2}

// String returns the Go-style name of the type ("float32", "int64",
// "bfloat16"), as package array names it.
func (d DType) String() string { return array.DType(d).String() }

// Supported reports whether the executor computes with tensors of this type.
func (d DType) Supported() bool {
	for _, s := range supportedDTypes {
		if d == s {
			return true
		}
	}
	return false
}

// IsFloat reports whether d is a floating-point type. Ops never see the
// narrow floats: runNode hands them float32 (narrow.go).
func (d DType) IsFloat() bool { return array.DType(d).IsFloat() }

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
// runs (bool is one byte, as Go stores it; float16 four, as float32).
func (d DType) size() int { return array.DType(d).Size() }
