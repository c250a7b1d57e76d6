package onnxio

import (
	"strconv"
	"strings"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"google.golang.org/protobuf/proto"
)

// Dim is one dimension of a value's declared shape: a fixed size, a
// symbolic name such as "batch" (dynamic axes keep these), or neither when
// the exporter left the dimension unknown.
type Dim struct {
	// Value is the size when the dimension is fixed.
	Value int64
	// Param is the symbolic name when the dimension is dynamic.
	Param string
	// Known reports whether Value holds a fixed size (dim_value was set).
	Known bool
}

// String prints a fixed dimension as its number, a symbolic one as its
// name, an unknown one as "?".
func (d Dim) String() string {
	switch {
	case d.Known:
		return strconv.FormatInt(d.Value, 10)
	case d.Param != "":
		return d.Param
	}
	return "?"
}

// HasShape reports whether a value info declares a tensor shape (possibly
// of rank 0). Without one, the rank is unknown.
func HasShape(vi *onnxpb.ValueInfoProto) bool {
	return vi.GetType().GetTensorType().GetShape() != nil
}

// Dims returns the declared shape of a tensor value, fixed and symbolic
// dimensions alike. It returns nil when the value is not a tensor or its
// shape is not declared, and an empty slice for a declared scalar; use
// HasShape to tell the two apart.
func Dims(vi *onnxpb.ValueInfoProto) []Dim {
	shape := vi.GetType().GetTensorType().GetShape()
	if shape == nil {
		return nil
	}
	dims := make([]Dim, len(shape.Dim))
	for i, d := range shape.Dim {
		switch v := d.GetValue().(type) {
		case *onnxpb.TensorShapeProto_Dimension_DimValue:
			dims[i] = Dim{Value: v.DimValue, Known: true}
		case *onnxpb.TensorShapeProto_Dimension_DimParam:
			dims[i] = Dim{Param: v.DimParam}
		}
	}
	return dims
}

// ElemType returns the element type of a tensor value, or UNDEFINED when
// the value is not a tensor.
func ElemType(vi *onnxpb.ValueInfoProto) DataType {
	return DataType(vi.GetType().GetTensorType().GetElemType())
}

// FormatDims prints a shape as "[batch seq 8]".
func FormatDims(dims []Dim) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// TensorValueInfo builds the value info of a tensor value with the given
// element type and shape; symbolic dimensions stay symbolic, which is how
// an export keeps batch and sequence axes dynamic.
func TensorValueInfo(name string, elem DataType, dims []Dim) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{Dim: make([]*onnxpb.TensorShapeProto_Dimension, len(dims))}
	for i, d := range dims {
		pd := &onnxpb.TensorShapeProto_Dimension{}
		switch {
		case d.Known:
			pd.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d.Value}
		case d.Param != "":
			pd.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d.Param}
		}
		shape.Dim[i] = pd
	}
	return &onnxpb.ValueInfoProto{
		Name: proto.String(name),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(elem)),
			Shape:    shape,
		}}},
	}
}

// FixedDim is a Dim of fixed size n.
func FixedDim(n int64) Dim { return Dim{Value: n, Known: true} }

// SymbolicDim is a Dim named param, for a dynamic axis.
func SymbolicDim(param string) Dim { return Dim{Param: param} }
