package onnxio_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"
)

// A model with one weight is written atomically, read back with its limits
// checked, and its weight converted to a *tensor.Dense.
func Example() {
	dir, err := os.MkdirTemp("", "onnxio-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	w, err := onnxio.DenseToTensor("W", tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4})))
	if err != nil {
		log.Fatal(err)
	}
	model := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Name:        proto.String("linear"),
			Node:        []*onnxpb.NodeProto{{OpType: proto.String("MatMul"), Input: []string{"x", "W"}, Output: []string{"y"}}},
			Initializer: []*onnxpb.TensorProto{w},
			Input: []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("x", onnxio.Float,
				[]onnxio.Dim{onnxio.SymbolicDim("batch"), onnxio.FixedDim(2)})},
			Output: []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("y", onnxio.Float,
				[]onnxio.Dim{onnxio.SymbolicDim("batch"), onnxio.FixedDim(2)})},
		},
	}
	path := filepath.Join(dir, "linear.onnx")
	if err := onnxio.WriteModel(path, model); err != nil {
		log.Fatal(err)
	}

	m, err := onnxio.ReadModel(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("opset:", onnxio.OpsetVersion(m, ""))
	fmt.Println("input x:", onnxio.FormatDims(onnxio.Dims(m.Graph.Input[0])))
	weight, err := onnxio.TensorToDense(m.Graph.Initializer[0])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("W:", weight.Shape(), weight.Data())

	_, err = onnxio.ReadModel(filepath.Join(dir, "missing.onnx"))
	fmt.Println(err != nil)
	// Output:
	// opset: 17
	// input x: [batch 2]
	// W: (2, 2) [1 2 3 4]
	// true
}
