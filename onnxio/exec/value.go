package exec

import (
	"fmt"
	"reflect"
	"slices"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
)

// value is a tensor while a graph runs: an element type, a shape and a
// dense row-major slice of len(shape) product elements.
//
// Values are immutable once an op has returned them. Ops that only change
// the shape (Reshape, Squeeze, Identity, ...) share the data slice of their
// input, which is why no op may ever write into an input.
type value struct {
	dtype DType
	shape []int
	data  any    // []float32, []float64, []int64, ..., []bool
	mem   *block // the run's reservation data belongs to; nil for inputs and constants
}

// newValue allocates a zero-filled value outside any budget: for constants
// the graph checked when it was prepared, and for tests. Ops allocate with
// runCtx.alloc.
func newValue(dt DType, shape []int) *value {
	return &value{dtype: dt, shape: shape, data: makeSlice(dt, numel(shape))}
}

// makeSlice allocates n zero elements of type dt, in the Go type package
// array holds it in ([]float32 for float16).
func makeSlice(dt DType, n int) any {
	if dt == Float32 {
		return make([]float32, n)
	}
	t := array.DType(dt).Storage()
	if t == nil {
		panic(fmt.Sprintf("exec: makeSlice of unsupported %s", dt))
	}
	return reflect.MakeSlice(reflect.SliceOf(t), n, n).Interface()
}

// dtypeOf returns the full-width element type of a data slice ([]float32:
// float32), or 0 if it is none.
func dtypeOf(data any) DType { return DType(array.Of(data)) }

// valueOf wraps a typed slice; it is how ops and tests build values.
func valueOf[T element](shape []int, data []T) *value {
	return &value{dtype: dtypeOf(data), shape: shape, data: data}
}

// scalarOf returns a rank-0 value holding x.
func scalarOf[T element](x T) *value { return valueOf([]int{}, []T{x}) }

// size is the number of elements.
func (v *value) size() int { return numel(v.shape) }

// rank is the number of dimensions.
func (v *value) rank() int { return len(v.shape) }

// withShape returns a value sharing v's data under another shape of the
// same size.
func (v *value) withShape(shape []int) *value {
	return &value{dtype: v.dtype, shape: shape, data: v.data, mem: v.mem}
}

// describe is how errors show a value: "float32 (2, 3)".
func (v *value) describe() string { return v.dtype.String() + " " + shapeString(v.shape) }

// cloneData returns a copy of a data slice.
func cloneData(data any) any {
	v := reflect.ValueOf(data)
	c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
	reflect.Copy(c, v)
	return c.Interface()
}

// fromDense wraps a *tensor.Dense without copying when it is contiguous;
// views and transposed tensors are materialized first. A rank-0 Dense
// (gorgonia returns its datum as a bare scalar) becomes a rank-0 value.
func fromDense(t *tensor.Dense) (*value, error) {
	if v := float32Dense(t); v != nil {
		return v, nil
	}
	a, err := array.FromDense(t)
	if err != nil {
		return nil, err
	}
	return &value{dtype: DType(a.DType), shape: a.Shape, data: a.Data}, nil
}

// float32Dense wraps a contiguous float32 Dense of rank ≥ 1 that holds
// exactly its elements, the usual input, with fewer allocations than
// array.FromDense, which takes every other case; nil if t is not one.
func float32Dense(t *tensor.Dense) *value {
	if t == nil || t.Dtype() != tensor.Float32 || t.IsScalar() || t.IsMaterializable() || !t.DataOrder().IsRowMajor() {
		return nil
	}
	shape, data := t.Shape(), t.Float32s()
	if len(shape) == 0 || len(data) != shape.TotalSize() {
		return nil
	}
	return &value{dtype: Float32, shape: slices.Clone([]int(shape)), data: data}
}

// fromArray wraps an Array without copying, after checking it. An Array
// of a narrow float type holding numbers the type cannot is rounded to it
// (saturating), in a copy; one of a 4- or 2-bit integer type holding
// numbers out of its range is an error.
func fromArray(a *array.Array) (*value, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	v := &value{dtype: DType(a.DType), shape: a.Shape, data: a.Data}
	switch {
	case isNarrowFloat(v.dtype) && !holdsRounded(v):
		v.data = cloneData(v.data)
		array.RoundSlice(a.DType, v.data.([]float32))
	case a.DType.IsNarrow() && a.DType.IsInteger():
		if err := checkNarrowInts(v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// toArray returns v as an Array sharing its data.
func (v *value) toArray() *array.Array {
	return &array.Array{DType: array.DType(v.dtype), Shape: v.shape, Data: v.data}
}

// wrapDense makes a *tensor.Dense of shape on data, without copying.
func wrapDense(shape []int, data any) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data)) // WithShape copies the shape
}

// errEmptyDense reports a value that *tensor.Dense cannot hold.
func errEmptyDense(v *value) error {
	return fmt.Errorf("tensor has shape %s with zero elements, which *tensor.Dense cannot hold (RunArrays returns it)", shapeString(v.shape))
}

// sliceLen returns the length of a data slice.
func sliceLen(data any) int { return reflect.ValueOf(data).Len() }

// subslice returns data[lo:hi] for any data slice.
func subslice(data any, lo, hi int) any { return reflect.ValueOf(data).Slice(lo, hi).Interface() }
