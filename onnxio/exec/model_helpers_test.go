package exec

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// graphSpec is a compact description of a test model.
type graphSpec struct {
	opset   int64
	nodes   []*onnxpb.NodeProto
	inputs  []*onnxpb.ValueInfoProto
	outputs []*onnxpb.ValueInfoProto
	inits   []*onnxpb.TensorProto
}

// model builds the ModelProto of a graphSpec (opset 17 unless set).
func (s graphSpec) model() *onnxpb.ModelProto {
	opset := s.opset
	if opset == 0 {
		opset = 17
	}
	return &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(opset)}},
		Graph: &onnxpb.GraphProto{
			Name:        proto.String("test"),
			Node:        s.nodes,
			Input:       s.inputs,
			Output:      s.outputs,
			Initializer: s.inits,
		},
	}
}

// nodeP builds a NodeProto.
func nodeP(name, op string, ins, outs []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{Name: proto.String(name), OpType: proto.String(op), Input: ins, Output: outs, Attribute: attrs}
}

func intAttr(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func intsAttr(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

func floatAttr(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

// info declares a tensor value; dims are ints (fixed) or strings
// (symbolic).
func info(name string, dt onnxio.DataType, dims ...any) *onnxpb.ValueInfoProto {
	ds := make([]onnxio.Dim, len(dims))
	for i, d := range dims {
		switch d := d.(type) {
		case int:
			ds[i] = onnxio.FixedDim(int64(d))
		case string:
			ds[i] = onnxio.SymbolicDim(d)
		}
	}
	return onnxio.TensorValueInfo(name, dt, ds)
}

// untyped declares a tensor value without a shape.
func untyped(name string, dt onnxio.DataType) *onnxpb.ValueInfoProto {
	vi := onnxio.TensorValueInfo(name, dt, nil)
	vi.GetType().GetTensorType().Shape = nil
	return vi
}

// dense builds a *tensor.Dense of the given shape (a scalar for no dims).
func dense[T any](shape []int, data ...T) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// initializer converts a dense tensor into a named TensorProto.
func initializer(t testing.TB, name string, d *tensor.Dense) *onnxpb.TensorProto {
	t.Helper()
	tp, err := onnxio.DenseToTensor(name, d)
	require.NoError(t, err)
	return tp
}

// floats returns the float32 data of a Dense.
func floats(t testing.TB, d *tensor.Dense) []float32 {
	t.Helper()
	require.NotNil(t, d)
	v, err := fromDense(d)
	require.NoError(t, err)
	return v.data.([]float32)
}
