package onnxio

import (
	"testing"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"
)

// smallModel builds y = Softmax(x·W + b) over the last axis, x of shape
// (batch, 3), with float initializers stored as raw_data by DenseToTensor:
// the kind of model attnrun exports.
func smallModel(t testing.TB) *onnxpb.ModelProto {
	t.Helper()
	w, err := DenseToTensor("W", tensor.New(tensor.WithShape(3, 4), tensor.WithBacking([]float32{
		0.1, 0.2, 0.3, 0.4,
		-0.5, 0.6, -0.7, 0.8,
		0.9, -1.0, 1.1, -1.2,
	})))
	require.NoError(t, err)
	b, err := DenseToTensor("b", tensor.New(tensor.WithShape(4), tensor.WithBacking([]float32{0.01, -0.02, 0.03, -0.04})))
	require.NoError(t, err)
	m := &onnxpb.ModelProto{
		IrVersion:       proto.Int64(8),
		ProducerName:    proto.String("attnrun"),
		ProducerVersion: proto.String("test"),
		OpsetImport:     []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}},
		Graph: &onnxpb.GraphProto{
			Name: proto.String("small"),
			Node: []*onnxpb.NodeProto{
				{Name: proto.String("matmul"), OpType: proto.String("MatMul"), Input: []string{"x", "W"}, Output: []string{"xw"}},
				{Name: proto.String("add"), OpType: proto.String("Add"), Input: []string{"xw", "b"}, Output: []string{"logits"}},
				{Name: proto.String("softmax"), OpType: proto.String("Softmax"), Input: []string{"logits"}, Output: []string{"y"},
					Attribute: []*onnxpb.AttributeProto{{
						Name: proto.String("axis"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1),
					}}},
			},
			Initializer: []*onnxpb.TensorProto{w, b},
			Input:       []*onnxpb.ValueInfoProto{TensorValueInfo("x", Float, []Dim{FixedDim(2), FixedDim(3)})},
			Output:      []*onnxpb.ValueInfoProto{TensorValueInfo("y", Float, []Dim{FixedDim(2), FixedDim(4)})},
		},
	}
	SetMetadata(m, "attnrun.config", "layers: []\n")
	return m
}

// boolMaskModel is smallModel plus a BOOL initializer in raw_data, as
// every PyTorch export of a causal mask carries, and a Where using it.
func boolMaskModel(t testing.TB) *onnxpb.ModelProto {
	t.Helper()
	m := smallModel(t)
	mask, err := DenseToTensor("mask", tensor.New(tensor.WithShape(2, 4), tensor.WithBacking([]bool{
		true, false, false, false,
		true, true, false, false,
	})))
	require.NoError(t, err)
	neg, err := DenseToTensor("neg", tensor.New(tensor.WithShape(1), tensor.WithBacking([]float32{-1e9})))
	require.NoError(t, err)
	g := m.Graph
	g.Initializer = append(g.Initializer, mask, neg)
	g.Node[1].Output = []string{"raw_logits"}
	g.Node = append(g.Node[:2], append([]*onnxpb.NodeProto{
		{Name: proto.String("where"), OpType: proto.String("Where"), Input: []string{"mask", "raw_logits", "neg"}, Output: []string{"logits"}},
	}, g.Node[2:]...)...)
	return m
}

// mustEncode encodes a model or fails the test.
func mustEncode(t testing.TB, m *onnxpb.ModelProto) []byte {
	t.Helper()
	data, err := EncodeModel(m)
	require.NoError(t, err)
	return data
}

// floatTensor builds a FLOAT TensorProto with raw_data for the given shape
// and values.
func floatTensor(t testing.TB, name string, shape []int, values []float32) *onnxpb.TensorProto {
	t.Helper()
	tp, err := DenseToTensor(name, tensor.New(tensor.WithShape(shape...), tensor.WithBacking(values)))
	require.NoError(t, err)
	return tp
}
