package onnxio

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"
)

// TestNoPanicOnAnyArgument calls every exported function of the codec with
// nil, empty and absurd arguments: each must return (an error where the
// argument is unusable), never panic.
func TestNoPanicOnAnyArgument(t *testing.T) {
	dir := t.TempDir()
	huge := &onnxpb.TensorProto{DataType: proto.Int32(int32(Float)), Dims: []int64{math.MaxInt64, math.MaxInt64}}
	negative := &onnxpb.TensorProto{DataType: proto.Int32(int32(Float)), Dims: []int64{-1}}
	unknownType := &onnxpb.TensorProto{DataType: proto.Int32(-7), Dims: []int64{1}}
	emptyModel := &onnxpb.ModelProto{}
	calls := map[string]func() error{
		"TensorToDense(nil)":        func() error { _, err := TensorToDense(nil); return err },
		"TensorToDense(empty)":      func() error { _, err := TensorToDense(&onnxpb.TensorProto{}); return err },
		"TensorToDense(huge)":       func() error { _, err := TensorToDense(huge); return err },
		"TensorToDense(negative)":   func() error { _, err := TensorToDense(negative); return err },
		"TensorToDense(unknown)":    func() error { _, err := TensorToDense(unknownType); return err },
		"Limits{}.TensorToDense":    func() error { _, err := Limits{}.TensorToDense(huge); return err },
		"DenseToTensor(nil)":        func() error { _, err := DenseToTensor("x", nil); return err },
		"DenseToTensor(zero Dense)": func() error { _, err := DenseToTensor("x", &tensor.Dense{}); return err },
		"EncodeTensor(nil)":         func() error { _, err := EncodeTensor(nil); return err },
		"WriteTensorFile(nil)":      func() error { return WriteTensorFile(filepath.Join(dir, "t.pb"), nil) },
		"WriteTensorFile(\"\")":     func() error { return WriteTensorFile("", huge) },
		"DecodeTensor(nil)":         func() error { _, err := DecodeTensor(nil, Limits{}); return err },
		"ReadTensorFile(\"\")":      func() error { _, err := ReadTensorFile(""); return err },
		"ReadTensorFile(dir)":       func() error { _, err := ReadTensorFile(dir); return err },
		"EncodeModel(nil)":          func() error { _, err := EncodeModel(nil); return err },
		"WriteModel(nil)":           func() error { return WriteModel(filepath.Join(dir, "m.onnx"), nil) },
		"DecodeModel(nil)":          func() error { _, err := DecodeModel(nil, "", Limits{}); return err },
		"ReadModel(\"\")":           func() error { _, err := ReadModel(""); return err },
		"ReadModel(dir)":            func() error { _, err := ReadModel(dir); return err },
		"ReadDataSet(\"\")":         func() error { _, err := ReadDataSet(""); return err },
		"WriteDataSet(nil)":         func() error { return WriteDataSet(dir, nil) },
		"WriteDataSet(nil tensor)":  func() error { return WriteDataSet(dir, &DataSet{Inputs: []*onnxpb.TensorProto{nil}}) },
		"DataSetDirs(\"\")":         func() error { _, err := DataSetDirs(""); return err },
		"CheckDims(huge)":           func() error { _, err := Limits{}.CheckDims(huge.Dims, 32); return err },
		"CheckDims(negative)":       func() error { _, err := DefaultLimits.CheckDims([]int64{-1}, -5); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			assert.NotPanics(t, func() { assert.Error(t, call()) })
		})
	}

	// Functions without an error result must not panic either.
	assert.NotPanics(t, func() {
		_, _ = EncodeModel(emptyModel)
		Metadata(nil, "k")
		Metadata(&onnxpb.ModelProto{MetadataProps: []*onnxpb.StringStringEntryProto{nil}}, "")
		SetMetadata(nil, "k", "v")
		SetMetadata(&onnxpb.ModelProto{MetadataProps: []*onnxpb.StringStringEntryProto{nil}}, "", "v")
		OpsetVersion(nil, "")
		OpsetVersion(&onnxpb.ModelProto{OpsetImport: []*onnxpb.OperatorSetIdProto{nil}}, "ai.onnx")
		HasShape(nil)
		Dims(nil)
		Dims(&onnxpb.ValueInfoProto{Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{nil}}}}}})
		ElemType(nil)
		FormatDims(nil)
		TensorValueInfo("", -1, nil)
		ElemBytes(-1)
		_ = Dim{}.String()
	})
}
