package onnxio

import (
	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// DataType is the ONNX element type of a tensor (TensorProto.data_type,
// TypeProto.Tensor.elem_type). Its values are those of array.DType, which
// names them and sizes them for the rest of attnrun.
type DataType = onnxpb.TensorProto_DataType

// The element types the conversions to and from *tensor.Dense handle.
const (
	Float    = onnxpb.TensorProto_FLOAT
	Float64  = onnxpb.TensorProto_DOUBLE
	Float16  = onnxpb.TensorProto_FLOAT16
	BFloat16 = onnxpb.TensorProto_BFLOAT16
	Int64    = onnxpb.TensorProto_INT64
	Int32    = onnxpb.TensorProto_INT32
	Int16    = onnxpb.TensorProto_INT16
	Int8     = onnxpb.TensorProto_INT8
	Uint64   = onnxpb.TensorProto_UINT64
	Uint32   = onnxpb.TensorProto_UINT32
	Uint16   = onnxpb.TensorProto_UINT16
	Uint8    = onnxpb.TensorProto_UINT8
	Bool     = onnxpb.TensorProto_BOOL
)

// typedField names the TensorProto field that holds a data type's elements
// when raw_data is not used.
type typedField int

const (
	noField typedField = iota
	floatData
	int32Data
	stringData
	int64Data
	doubleData
	uint64Data
)

func (f typedField) String() string {
	return [...]string{"", "float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data"}[f]
}

// dtypeLayout is how one data type is stored.
type dtypeLayout struct {
	bits  int        // bits per element in raw_data (0: no raw form, strings)
	field typedField // the typed field
	// perValue relates typed-field values to elements: n > 0 means n
	// values per element (complex numbers are 2 floats), -n means n
	// elements packed into each value (4-bit types: -2, 2-bit types: -4).
	perValue int
}

// typedFields is the typed field each data type uses and how many values
// make an element there; the bits come from the one dtype table,
// package array.
var typedFields = map[DataType]struct {
	field    typedField
	perValue int
}{
	onnxpb.TensorProto_FLOAT:          {floatData, 1},
	onnxpb.TensorProto_UINT8:          {int32Data, 1},
	onnxpb.TensorProto_INT8:           {int32Data, 1},
	onnxpb.TensorProto_UINT16:         {int32Data, 1},
	onnxpb.TensorProto_INT16:          {int32Data, 1},
	onnxpb.TensorProto_INT32:          {int32Data, 1},
	onnxpb.TensorProto_INT64:          {int64Data, 1},
	onnxpb.TensorProto_STRING:         {stringData, 1},
	onnxpb.TensorProto_BOOL:           {int32Data, 1},
	onnxpb.TensorProto_FLOAT16:        {int32Data, 1},
	onnxpb.TensorProto_DOUBLE:         {doubleData, 1},
	onnxpb.TensorProto_UINT32:         {uint64Data, 1},
	onnxpb.TensorProto_UINT64:         {uint64Data, 1},
	onnxpb.TensorProto_COMPLEX64:      {floatData, 2},
	onnxpb.TensorProto_COMPLEX128:     {doubleData, 2},
	onnxpb.TensorProto_BFLOAT16:       {int32Data, 1},
	onnxpb.TensorProto_FLOAT8E4M3FN:   {int32Data, 1},
	onnxpb.TensorProto_FLOAT8E4M3FNUZ: {int32Data, 1},
	onnxpb.TensorProto_FLOAT8E5M2:     {int32Data, 1},
	onnxpb.TensorProto_FLOAT8E5M2FNUZ: {int32Data, 1},
	onnxpb.TensorProto_UINT4:          {int32Data, -2},
	onnxpb.TensorProto_INT4:           {int32Data, -2},
	onnxpb.TensorProto_FLOAT4E2M1:     {int32Data, -2},
	onnxpb.TensorProto_FLOAT8E8M0:     {int32Data, 1},
	onnxpb.TensorProto_UINT2:          {int32Data, -4},
	onnxpb.TensorProto_INT2:           {int32Data, -4},
}

// layouts is how each data type ONNX defines is stored.
var layouts = func() map[DataType]dtypeLayout {
	m := make(map[DataType]dtypeLayout, len(typedFields))
	for dt, f := range typedFields {
		m[dt] = dtypeLayout{array.DType(dt).Bits(), f.field, f.perValue}
	}
	return m
}()

// valuesFor is how many typed-field values hold elems elements.
func (l dtypeLayout) valuesFor(elems int64) int64 {
	if l.perValue < 0 {
		k := int64(-l.perValue)
		return (elems + k - 1) / k
	}
	return elems * int64(l.perValue)
}

// ElemBytes is the size in bytes of one element of dt in raw_data: 0 for
// STRING, for sub-byte types and for values this package does not know.
func ElemBytes(dt DataType) int {
	l, ok := layouts[dt]
	if !ok || l.bits%8 != 0 {
		return 0
	}
	return l.bits / 8
}
