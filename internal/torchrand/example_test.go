package torchrand_test

import (
	"fmt"

	"github.com/attnrun/attnrun/internal/torchrand"
	"github.com/attnrun/attnrun/registry"
)

// Replays
//
//	torch.manual_seed(123)
//	layer = torch.nn.Linear(3, 2)
//
// drawing the weight, then the bias, as nn.Linear.reset_parameters does.
func Example() {
	g := torchrand.New(123)
	weight := make([]float32, 2*3) // (out, in)
	bias := make([]float32, 2)
	wb := registry.LinearInit(3).B // the bounds nn.Linear computes
	bb := registry.LinearBiasInit(3).B
	if err := g.Uniform(weight, -wb, wb); err != nil {
		panic(err)
	}
	if err := g.Uniform(bias, -bb, bb); err != nil {
		panic(err)
	}
	fmt.Printf("%.4f\n%.4f\n", weight, bias)
	// Output:
	// [-0.2354 0.0191 -0.2867 0.2177 -0.4919 0.4232]
	// [-0.4196 -0.4590]
}
