package layers_test

import (
	"fmt"
	"log"

	"github.com/attnrun/attnrun/layers"
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Simple attention on the six "Your journey starts with one step" tokens of
// the first seed notebook reproduces its all_context_vecs.
func Example() {
	x := tensor.New(tensor.WithShape(6, 3), tensor.WithBacking([]float32{
		0.43, 0.15, 0.89,
		0.55, 0.87, 0.66,
		0.57, 0.85, 0.64,
		0.22, 0.58, 0.33,
		0.77, 0.25, 0.10,
		0.05, 0.80, 0.55,
	}))
	attn := &layers.Simple{}
	if err := attn.Validate(); err != nil {
		log.Fatal(err)
	}
	y, err := attn.Forward(&registry.Run{}, []*tensor.Dense{x})
	if err != nil {
		log.Fatal(err)
	}
	data := y.Data().([]float32)
	for t := 0; t < 6; t++ {
		fmt.Printf("%.4f\n", data[t*3:t*3+3])
	}
	// Output:
	// [0.4421 0.5931 0.5790]
	// [0.4419 0.6515 0.5683]
	// [0.4431 0.6496 0.5671]
	// [0.4304 0.6298 0.5510]
	// [0.4671 0.5910 0.5266]
	// [0.4177 0.6503 0.5645]
}

// A hook on the Run receives the attention weights of every attention layer
// as (B, H, T, T); here the causal running mean of the third seed notebook.
func ExampleAverage() {
	x := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float32{2, 7, 6, 4, 6, 5}))
	run := &registry.Run{Layer: "bow", Hook: func(layer string, w *tensor.Dense) {
		fmt.Printf("%s %v %.4f\n", layer, w.Shape(), w.Data())
	}}
	y, err := (&layers.Average{}).Forward(run, []*tensor.Dense{x})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v %.4f\n", y.Shape(), y.Data())
	// Output:
	// bow (1, 1, 3, 3) [1.0000 0.0000 0.0000 0.5000 0.5000 0.0000 0.3333 0.3333 0.3333]
	// (3, 2) [2.0000 7.0000 4.0000 5.5000 4.6667 5.3333]
}
