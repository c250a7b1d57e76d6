package onnxio

import (
	"testing"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"
)

func TestValueInfoDims(t *testing.T) {
	dims := []Dim{SymbolicDim("batch"), SymbolicDim("seq"), FixedDim(8), {}}
	vi := TensorValueInfo("x", Float, dims)

	// Through the wire and back: symbolic names and the unknown dim survive.
	data, err := proto.Marshal(vi)
	assert.NoError(t, err)
	back := &onnxpb.ValueInfoProto{}
	assert.NoError(t, proto.Unmarshal(data, back))

	assert.True(t, HasShape(back))
	assert.Equal(t, dims, Dims(back))
	assert.Equal(t, Float, ElemType(back))
	assert.Equal(t, "[batch seq 8 ?]", FormatDims(Dims(back)))

	scalar := TensorValueInfo("s", Int64, nil)
	assert.True(t, HasShape(scalar))
	assert.Empty(t, Dims(scalar))
	assert.NotNil(t, Dims(scalar))

	noShape := &onnxpb.ValueInfoProto{Name: proto.String("u"), Type: &onnxpb.TypeProto{
		Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(Float))}},
	}}
	assert.False(t, HasShape(noShape))
	assert.Nil(t, Dims(noShape))

	seq := &onnxpb.ValueInfoProto{Name: proto.String("q"), Type: &onnxpb.TypeProto{
		Value: &onnxpb.TypeProto_SequenceType{SequenceType: &onnxpb.TypeProto_Sequence{}},
	}}
	assert.Nil(t, Dims(seq))
	assert.Equal(t, onnxpb.TensorProto_UNDEFINED, ElemType(seq))
	assert.Nil(t, Dims(nil))
}
