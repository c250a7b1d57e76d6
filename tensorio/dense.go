package tensorio

import (
	"errors"
	"fmt"

	"gorgonia.org/tensor"
)

// newDense wraps decoded data (a slice with one element per entry of shape)
// in a tensor. A shape of rank 0 gives a scalar tensor.
func newDense(shape []int64, data any) *tensor.Dense {
	dims := make([]int, len(shape))
	for i, d := range shape {
		dims[i] = int(d)
	}
	return tensor.New(tensor.WithShape(dims...), tensor.WithBacking(data))
}

// contiguousData returns t's elements in row-major order as a slice of its
// Go element type, with its element type and shape. Views (slices,
// transposes) are copied out in logical order; scalars give a slice of one.
func contiguousData(t *tensor.Dense) (data any, e elemType, shape []int64, err error) {
	if t == nil {
		return nil, elemType{}, nil, errors.New("tensor is nil")
	}
	// A Dense built by hand can be inconsistent enough for gorgonia to
	// panic while copying it out; report that as an error.
	defer func() {
		if r := recover(); r != nil {
			data, e, shape, err = nil, elemType{}, nil, fmt.Errorf("malformed tensor: %v", r)
		}
	}()
	e, err = elemTypeOf(t.Dtype())
	if err != nil {
		return nil, elemType{}, nil, err
	}
	if t.IsMaterializable() {
		m, ok := t.Materialize().(*tensor.Dense)
		if !ok {
			return nil, elemType{}, nil, fmt.Errorf("cannot copy out a view of type %T", t.Materialize())
		}
		t = m
	}
	for _, d := range t.Shape() {
		shape = append(shape, int64(d))
	}
	if t.IsScalar() {
		shape = []int64{}
		data = scalarSlice(t.Data())
	} else {
		data = t.Data()
	}
	if data == nil || sliceLen(data) != t.Shape().TotalSize() {
		return nil, elemType{}, nil, fmt.Errorf("tensor of shape %v holds %d values", t.Shape(), sliceLen(data))
	}
	return data, e, shape, nil
}

// scalarSlice wraps the value a scalar tensor's Data returns in a slice.
func scalarSlice(v any) any {
	switch v := v.(type) {
	case float32:
		return []float32{v}
	case float64:
		return []float64{v}
	case int64:
		return []int64{v}
	case int32:
		return []int32{v}
	case uint8:
		return []uint8{v}
	case int8:
		return []int8{v}
	case bool:
		return []bool{v}
	}
	return v // already a slice, or unsupported: sliceLen reports it
}

// sliceLen is the length of a slice of one of the supported element types,
// or -1 for anything else.
func sliceLen(data any) int {
	switch s := data.(type) {
	case []float32:
		return len(s)
	case []float64:
		return len(s)
	case []int64:
		return len(s)
	case []int32:
		return len(s)
	case []uint8:
		return len(s)
	case []int8:
		return len(s)
	case []bool:
		return len(s)
	}
	return -1
}
