package attnmath_test

import (
	"fmt"
	"log"

	"github.com/attnrun/attnrun/attnmath"
)

// Causal self-attention of one head over three tokens, as a layer's
// Forward computes it: project with Linear, then Attend. PyTorch gives
// the same numbers for
//
//	q, k, v = F.linear(x, wq), F.linear(x, wk), F.linear(x, wv, bv)
//	w = (q @ k.T / math.sqrt(2)).masked_fill(torch.ones(3, 3).triu(1).bool(), -inf).softmax(-1)
//	w @ v
func Example() {
	const tokens, dIn, d = 3, 2, 2
	x := []float32{
		1, 0,
		0, 1,
		1, 1,
	}
	wq := []float32{1, 0, 0, 1}                       // identity
	wk := []float32{2, 0, 0, 2}                       // doubles the keys
	wv, bv := []float32{0, 1, 1, 0}, []float32{0, 10} // swaps the features, adds 10 to the second

	q, k, v := make([]float32, tokens*d), make([]float32, tokens*d), make([]float32, tokens*d)
	for _, p := range []struct{ y, w, b []float32 }{{q, wq, nil}, {k, wk, nil}, {v, wv, bv}} {
		if err := attnmath.Linear(p.y, x, p.w, p.b, tokens, dIn, d); err != nil {
			log.Fatal(err)
		}
	}
	out := make([]float32, tokens*d)
	weights := make([]float32, tokens*tokens)
	a := attnmath.Attention{Batch: 1, Heads: 1, Queries: tokens, Keys: tokens, HeadDim: d, Causal: true, Weights: weights}
	if err := attnmath.Attend(out, q, k, v, a); err != nil {
		log.Fatal(err)
	}
	for i := range tokens {
		fmt.Printf("weights %.4f  output %.4f\n", weights[i*tokens:(i+1)*tokens], out[i*d:(i+1)*d])
	}
	// Output:
	// weights [1.0000 0.0000 0.0000]  output [0.0000 11.0000]
	// weights [0.1956 0.8044 0.0000]  output [0.8044 10.1956]
	// weights [0.1636 0.1636 0.6728]  output [0.8364 10.8364]
}
