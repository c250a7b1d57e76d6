package exec_test

import (
	"fmt"
	"log"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// A graph usually comes from onnxio.ReadModel; this one is built in code:
// attention weights softmax(q·kᵀ) for a (batch, 2) query against two fixed
// keys.
func Example() {
	keys, err := onnxio.DenseToTensor("keys_t", tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{
		1, 0,
		0, 1,
	})))
	if err != nil {
		log.Fatal(err)
	}
	m := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Node: []*onnxpb.NodeProto{
				{Name: proto.String("/scores"), OpType: proto.String("MatMul"), Input: []string{"q", "keys_t"}, Output: []string{"scores"}},
				{Name: proto.String("/softmax"), OpType: proto.String("Softmax"), Input: []string{"scores"}, Output: []string{"weights"}},
			},
			Initializer: []*onnxpb.TensorProto{keys},
			Input:       []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("q", onnxio.Float, []onnxio.Dim{onnxio.SymbolicDim("batch"), onnxio.FixedDim(2)})},
			Output:      []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("weights", onnxio.Float, []onnxio.Dim{onnxio.SymbolicDim("batch"), onnxio.FixedDim(2)})},
		},
	}

	g, err := exec.New(m)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("inputs:", g.Inputs())
	q := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{
		0, 0,
		2, 0,
	}))
	out, err := g.Run(map[string]*tensor.Dense{"q": q})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("weights: %.4f\n", out["weights"].Data())

	_, err = g.Run(map[string]*tensor.Dense{"q": tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(make([]float32, 6)))})
	fmt.Println(err)
	// Output:
	// inputs: [q float32 [batch 2]]
	// weights: [0.5000 0.5000 0.8808 0.1192]
	// exec: input "q": shape (2, 3): dimension 1 is 3, the graph declares q float32 [batch 2]
}
