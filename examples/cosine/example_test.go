package cosine_test

import (
	"fmt"
	"log"

	"gorgonia.org/tensor"

	_ "github.com/attnrun/attnrun/examples/cosine" // registers attention.cosine
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/registry"
)

// Once the package is imported, attention.cosine is a layer type like any
// other: a model config names it, Init draws its weights as PyTorch would
// after torch.manual_seed, and a hook on the Run sees its attention weights.
// The numbers are PyTorch's for CosineAttention(3, 2, causal=True) of
// testdata/reference.py built after torch.manual_seed(123).
func Example() {
	model, err := models.Parse([]byte(`
name: cosine-demo
layers:
  - {name: attn, type: attention.cosine, d_in: 3, d_out: 2, causal: true}
`), "demo.yaml")
	if err != nil {
		log.Fatal(err)
	}
	if err := model.Init(123); err != nil {
		log.Fatal(err)
	}
	x := tensor.New(tensor.WithShape(3, 3), tensor.WithBacking([]float32{
		0.43, 0.15, 0.89,
		0.55, 0.87, 0.66,
		0.57, 0.85, 0.64,
	}))
	run := &registry.Run{Hook: func(layer string, w *tensor.Dense) {
		fmt.Printf("%s weights %v: %.4f\n", layer, w.Shape(), w.Data())
	}}
	y, err := model.Forward(run, x)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("output %v: %.4f\n", y.Shape(), y.Data())
	// Output:
	// attn weights (1, 1, 3, 3): [1.0000 0.0000 0.0000 0.2321 0.7679 0.0000 0.1387 0.4336 0.4277]
	// output (3, 2): [-0.4519 0.2216 -0.6533 -0.0991 -0.6772 -0.1386]
}
