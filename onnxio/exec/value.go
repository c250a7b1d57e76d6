package exec

import (
	"fmt"
	"reflect"
	"slices"

	"gorgonia.org/tensor"
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

// goTypes maps each supported element type to its Go type. Generic kernels
// do the element work; reflection only allocates, slices and copies.
var goTypes = map[DType]reflect.Type{
	Float32: reflect.TypeFor[float32](), Float64: reflect.TypeFor[float64](),
	Int64: reflect.TypeFor[int64](), Int32: reflect.TypeFor[int32](),
	Int16: reflect.TypeFor[int16](), Int8: reflect.TypeFor[int8](),
	Uint64: reflect.TypeFor[uint64](), Uint32: reflect.TypeFor[uint32](),
	Uint16: reflect.TypeFor[uint16](), Uint8: reflect.TypeFor[uint8](),
	Bool: reflect.TypeFor[bool](),
}

// makeSlice allocates n zero elements of type dt.
func makeSlice(dt DType, n int) any {
	t, ok := goTypes[dt]
	if !ok {
		panic(fmt.Sprintf("exec: makeSlice of unsupported %s", dt))
	}
	return reflect.MakeSlice(reflect.SliceOf(t), n, n).Interface()
}

// dtypeOf returns the element type of a data slice, or 0 if it is none.
func dtypeOf(data any) DType {
	t := reflect.TypeOf(data)
	if t == nil || t.Kind() != reflect.Slice {
		return 0
	}
	for dt, et := range goTypes {
		if et == t.Elem() {
			return dt
		}
	}
	return 0
}

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

// denseDTypes maps gorgonia's element types to ours.
var denseDTypes = map[tensor.Dtype]DType{
	tensor.Float32: Float32, tensor.Float64: Float64,
	tensor.Int64: Int64, tensor.Int32: Int32, tensor.Int16: Int16, tensor.Int8: Int8,
	tensor.Uint64: Uint64, tensor.Uint32: Uint32, tensor.Uint16: Uint16, tensor.Uint8: Uint8,
	tensor.Bool: Bool,
}

// fromDense wraps a *tensor.Dense without copying when it is contiguous;
// views and transposed tensors are materialized first. A rank-0 Dense
// (gorgonia returns its datum as a bare scalar) becomes a rank-0 value.
func fromDense(t *tensor.Dense) (*value, error) {
	if t == nil {
		return nil, fmt.Errorf("tensor is nil")
	}
	dt, ok := denseDTypes[t.Dtype()]
	if !ok {
		return nil, fmt.Errorf("tensor element type %v is not supported (use float32, float64, int64, int32, int16, int8, uint64, uint32, uint16, uint8 or bool)", t.Dtype())
	}
	if t.IsMaterializable() {
		m, ok := t.Materialize().(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("cannot materialize tensor view")
		}
		t = m
	}
	shape := slices.Clone([]int(t.Shape()))
	if t.IsScalar() {
		shape = []int{}
	}
	data := t.Data()
	if dtypeOf(data) == 0 { // a scalar: wrap its datum in a one-element slice
		s := makeSlice(dt, 1)
		setAny(s, 0, data)
		data = s
	}
	v := &value{dtype: dt, shape: shape, data: data}
	if n := sliceLen(data); n != v.size() {
		if n < v.size() {
			return nil, fmt.Errorf("tensor of shape %s holds only %d elements", shapeString(shape), n)
		}
		v.data = subslice(data, 0, v.size())
	}
	return v, nil
}

// toDense copies a value into a new *tensor.Dense, so that callers may
// write into what Run returns without touching the graph's own tensors.
// gorgonia's Dense cannot hold zero elements, so empty values are an error.
func toDense(v *value) (*tensor.Dense, error) {
	if v.size() == 0 {
		return nil, errEmptyDense(v)
	}
	return wrapDense(v.shape, cloneData(v.data)), nil
}

// wrapDense makes a *tensor.Dense of shape on data, without copying.
func wrapDense(shape []int, data any) *tensor.Dense {
	return tensor.New(tensor.WithShape(slices.Clone(shape)...), tensor.WithBacking(data))
}

// errEmptyDense reports a value that *tensor.Dense cannot hold.
func errEmptyDense(v *value) error {
	return fmt.Errorf("tensor has shape %s with zero elements, which *tensor.Dense cannot hold", shapeString(v.shape))
}

// sliceLen returns the length of a data slice.
func sliceLen(data any) int { return reflect.ValueOf(data).Len() }

// subslice returns data[lo:hi] for any data slice.
func subslice(data any, lo, hi int) any { return reflect.ValueOf(data).Slice(lo, hi).Interface() }

// setAny stores the scalar x (of the slice's element type) at s[i].
func setAny(s any, i int, x any) { reflect.ValueOf(s).Index(i).Set(reflect.ValueOf(x)) }
