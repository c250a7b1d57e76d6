package models_test

import (
	"fmt"
	"log"

	"gorgonia.org/tensor"

	// The blank import registers the built-in layer types; without it,
	// Parse fails with "unknown layer type ... no layer type is registered".
	_ "github.com/attnrun/attnrun/layers"
	"github.com/attnrun/attnrun/models"
)

// A model from YAML runs once it has weights. Init(123) draws what
// torch.manual_seed(123) followed by the PyTorch module's construction
// draws, so the output is the one the notebook prints for CausalAttention
// on the six "Your journey starts with one step" embeddings.
func Example() {
	m, err := models.Parse([]byte(`
name: causal
layers:
  - {name: attn, type: attention.causal, d_in: 3, d_out: 2, context_length: 6}
`), "causal.yaml")
	if err != nil {
		log.Fatal(err)
	}
	x := tensor.New(tensor.WithShape(6, 3), tensor.WithBacking([]float32{
		0.43, 0.15, 0.89, 0.55, 0.87, 0.66, 0.57, 0.85, 0.64,
		0.22, 0.58, 0.33, 0.77, 0.25, 0.10, 0.05, 0.80, 0.55,
	}))
	if _, err := m.Forward(nil, x); err != nil {
		fmt.Println(err)
	}
	if err := m.Init(123); err != nil {
		log.Fatal(err)
	}
	y, err := m.Forward(nil, x)
	if err != nil {
		log.Fatal(err)
	}
	for i := range 6 {
		fmt.Printf("%.4f\n", y.Data().([]float32)[2*i:2*i+2])
	}
	// Output:
	// model "causal" has no weights: call Init(seed), LoadWeights(path) or LoadStateDict before running it (its parameters are all zero)
	// [-0.4519 0.2216]
	// [-0.5874 0.0058]
	// [-0.6300 -0.0632]
	// [-0.5675 -0.0843]
	// [-0.5526 -0.0981]
	// [-0.5299 -0.1081]
}
