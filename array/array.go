// Package array is attnrun's own n-dimensional value: an element type,
// a shape and a flat row-major slice.
//
// The public API speaks gorgonia's *tensor.Dense, which cannot hold a
// tensor of zero elements, nor say that float32 numbers are float16 ones.
// Real files have both: a KV cache of past length 0, an empty Slice or
// Split, float16 and bfloat16 weights. The ONNX codec, the test-data sets,
// the .npy files and the executor carry such tensors as an *Array, and
// convert to *tensor.Dense only at the edges (Array.Dense, FromDense).
//
// Element types are ONNX's (DType, with ONNX's codes). The narrow floats
// (float16, bfloat16, the float8 and float4 types) are held widened to
// float32, exactly, and always hold values of their type; RoundFloat and
// the Float*Bits functions are the project's one codec for them. The 4-
// and 2-bit integers are held as int8 or uint8.
package array

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gorgonia.org/tensor"
)

// Array is a tensor of any shape, zero elements included.
type Array struct {
	// DType is the element type.
	DType DType
	// Shape lists the dimensions, outermost first; empty for a scalar. A
	// dimension may be 0.
	Shape []int
	// Data holds the elements in row-major order, as a slice of the Go
	// type DType.Storage() names ([]float32 for float32 and float16,
	// []int64 for int64, []bool for bool, ...), of length Len().
	Data any
}

// New returns a zero-filled Array. Every dimension must be non-negative.
func New(dt DType, shape ...int) (*Array, error) {
	if !dt.Storable() {
		return nil, fmt.Errorf("array: element type %s cannot be held (want a numeric type or bool)", dt)
	}
	n, err := elements(shape)
	if err != nil {
		return nil, err
	}
	data := reflect.MakeSlice(reflect.SliceOf(dt.Storage()), n, n).Interface()
	return &Array{DType: dt, Shape: slices.Clone(shape), Data: data}, nil
}

// FromSlice wraps data, without copying, as an Array of shape whose
// element type is the full-width type of T (float32 for []float32).
func FromSlice[T float32 | float64 | int64 | int32 | int16 | int8 | uint64 | uint32 | uint16 | uint8 | bool](shape []int, data []T) *Array {
	return &Array{DType: Of(data), Shape: shape, Data: data}
}

// elements returns the number of elements of shape, refusing negative
// dimensions and products that overflow an int.
func elements(shape []int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("array: shape %s has a negative dimension", FormatShape(shape))
		}
		if d != 0 && n > int(^uint(0)>>1)/d {
			return 0, fmt.Errorf("array: shape %s has more elements than an int can count", FormatShape(shape))
		}
		n *= d
	}
	return n, nil
}

// Len is the number of elements: the product of the dimensions (1 for a
// scalar, 0 when a dimension is 0).
func (a *Array) Len() int {
	if a == nil {
		return 0
	}
	n := 1
	for _, d := range a.Shape {
		n *= d
	}
	return n
}

// Check reports whether a is consistent: a storable element type, Data a
// slice of its storage type, and Len() elements.
func (a *Array) Check() error {
	if a == nil {
		return errors.New("array: nil *Array")
	}
	if !a.DType.Storable() {
		return fmt.Errorf("array: element type %s cannot be held (want a numeric type or bool)", a.DType)
	}
	n, err := elements(a.Shape)
	if err != nil {
		return err
	}
	v := reflect.ValueOf(a.Data)
	if !v.IsValid() || v.Kind() != reflect.Slice || v.Type().Elem() != a.DType.Storage() {
		return fmt.Errorf("array: %s data is %T, want []%s", a.DType, a.Data, a.DType.Storage())
	}
	if v.Len() != n {
		return fmt.Errorf("array: shape %s needs %d elements, the data has %d", FormatShape(a.Shape), n, v.Len())
	}
	return nil
}

// Clone returns a deep copy of a (nil for nil).
func (a *Array) Clone() *Array {
	if a == nil {
		return nil
	}
	c := &Array{DType: a.DType, Shape: slices.Clone(a.Shape), Data: a.Data}
	if v := reflect.ValueOf(a.Data); v.Kind() == reflect.Slice {
		d := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(d, v)
		c.Data = d.Interface()
	}
	return c
}

// String describes a without its elements: "float16 (2, 0, 4)".
func (a *Array) String() string {
	if a == nil {
		return "<nil>"
	}
	return a.DType.String() + " " + FormatShape(a.Shape)
}

// FormatShape writes a shape as Python prints a tuple: (), (3,), (2, 3).
// It is attnrun's shape formatter for errors and listings.
func FormatShape[T ~int | ~int64](shape []T) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatInt(int64(d), 10)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// denseTypes maps the storage types to gorgonia's element types.
var denseTypes = map[reflect.Type]tensor.Dtype{
	reflect.TypeFor[float32](): tensor.Float32, reflect.TypeFor[float64](): tensor.Float64,
	reflect.TypeFor[int64](): tensor.Int64, reflect.TypeFor[int32](): tensor.Int32,
	reflect.TypeFor[int16](): tensor.Int16, reflect.TypeFor[int8](): tensor.Int8,
	reflect.TypeFor[uint64](): tensor.Uint64, reflect.TypeFor[uint32](): tensor.Uint32,
	reflect.TypeFor[uint16](): tensor.Uint16, reflect.TypeFor[uint8](): tensor.Uint8,
	reflect.TypeFor[bool](): tensor.Bool,
}

// DenseDtype is gorgonia's element type for the storage of d (float32 for
// float16, int8 for int4); ok is false when a *tensor.Dense cannot hold d.
func (d DType) DenseDtype() (dt tensor.Dtype, ok bool) {
	dt, ok = denseTypes[d.Storage()]
	return dt, ok
}

// Dense returns a as a *tensor.Dense sharing its data. A narrow type
// becomes its storage type (float16 a float32 Dense, int4 an int8 one).
// A *tensor.Dense cannot hold zero elements: an empty Array is an error.
// A scalar becomes a rank-0 Dense.
func (a *Array) Dense() (*tensor.Dense, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	if a.Len() == 0 {
		return nil, fmt.Errorf("array: %s has zero elements, which *tensor.Dense cannot hold", a)
	}
	if len(a.Shape) == 0 {
		return tensor.New(tensor.FromScalar(reflect.ValueOf(a.Data).Index(0).Interface())), nil
	}
	return tensor.New(tensor.WithShape(slices.Clone(a.Shape)...), tensor.WithBacking(a.Data)), nil
}

// FromDense returns t as an Array, sharing its data when t is contiguous;
// views are copied out first. A rank-0 Dense becomes a scalar Array.
func FromDense(t *tensor.Dense) (a *Array, err error) {
	if t == nil {
		return nil, errors.New("array: nil *tensor.Dense")
	}
	// A Dense built by hand can be inconsistent enough for gorgonia to
	// panic while it is read; report that as an error.
	defer func() {
		if r := recover(); r != nil {
			a, err = nil, fmt.Errorf("array: malformed *tensor.Dense: %v", r)
		}
	}()
	var dt DType
	for storage, d := range denseTypes {
		if d == t.Dtype() {
			dt = Of(reflect.MakeSlice(reflect.SliceOf(storage), 0, 0).Interface())
		}
	}
	if dt == Undefined {
		return nil, fmt.Errorf("array: dtype %v is not supported (want float32, float64, a signed or unsigned integer type, or bool)", t.Dtype())
	}
	if t.IsMaterializable() {
		m, ok := t.Materialize().(*tensor.Dense)
		if !ok {
			return nil, errors.New("array: cannot copy out a view")
		}
		t = m
	}
	shape := slices.Clone([]int(t.Shape()))
	data := t.Data()
	if t.IsScalar() {
		shape = []int{}
		if v := reflect.ValueOf(data); v.Kind() != reflect.Slice {
			s := reflect.MakeSlice(reflect.SliceOf(v.Type()), 1, 1)
			s.Index(0).Set(v)
			data = s.Interface()
		}
	}
	a = &Array{DType: dt, Shape: shape, Data: data}
	if n, have := a.Len(), reflect.ValueOf(data).Len(); have != n {
		if have < n {
			return nil, fmt.Errorf("array: *tensor.Dense of shape %s holds only %d elements", FormatShape(shape), have)
		}
		a.Data = reflect.ValueOf(data).Slice(0, n).Interface()
	}
	return a, nil
}
