package export_test

import (
	"fmt"
	"log"

	_ "github.com/attnrun/attnrun/layers" // the built-in layers
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
)

// Model turns a model into an ONNX graph that ONNX Runtime runs; the
// YAML config travels along in the metadata.
func ExampleModel() {
	m, err := models.Parse([]byte(`
name: heads
layers:
  - {name: attn, type: attention.multihead, d_in: 8, d_out: 8, context_length: 16, num_heads: 2}
`), "heads.yaml")
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Init(123); err != nil {
		log.Fatal(err)
	}
	pb, err := export.Model(m, export.Options{Opset: 17})
	if err != nil {
		log.Fatal(err)
	}
	g := pb.GetGraph()
	fmt.Println("input ", g.GetInput()[0].GetName(), onnxio.FormatDims(onnxio.Dims(g.GetInput()[0])))
	fmt.Println("output", g.GetOutput()[0].GetName(), onnxio.FormatDims(onnxio.Dims(g.GetOutput()[0])))
	for _, t := range g.GetInitializer() {
		fmt.Println("initializer", t.GetName(), t.GetDims())
	}
	version, _ := onnxio.Metadata(pb, export.MetadataVersion)
	fmt.Println("metadata version", version)
	// Write it with onnxio.WriteModel("heads.onnx", pb).

	// Output:
	// input  x [batch seq 8]
	// output y [batch seq 8]
	// initializer attn.W_query.weight [8 8]
	// initializer attn.W_key.weight [8 8]
	// initializer attn.W_value.weight [8 8]
	// initializer attn.out_proj.weight [8 8]
	// initializer attn.out_proj.bias [8]
	// metadata version 1
}
