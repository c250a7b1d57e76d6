package cosine

import (
	"fmt"
	"math/big"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// The interface guard: `attnrun inspect` and models.Model.Profile count
// the FLOPs of a layer that implements registry.FLOPCounter.
var _ registry.FLOPCounter = (*Cosine)(nil)

// FLOPs counts a forward pass by registry.FLOPCounter's rules, matrix
// products only: the three projections, 2·B·T·d_in·3·d_out, and the two
// attention products q̂k̂ᵀ and weights·v, 4·B·T²·d_out, dense even when
// causal. The normalization, like every elementwise step, is not counted.
func (c *Cosine) FLOPs(inputs []tensor.Shape) (int64, error) {
	if len(inputs) != 1 {
		return 0, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	shape := inputs[0]
	if len(shape) != 2 && len(shape) != 3 {
		return 0, fmt.Errorf("input shape %v: want (T, d_in) or (B, T, d_in)", shape)
	}
	for _, d := range shape {
		if d <= 0 {
			return 0, fmt.Errorf("input shape %v has an empty dimension", shape)
		}
	}
	b, t, d := 1, shape[0], shape[1]
	if len(shape) == 3 {
		b, t, d = shape[0], shape[1], shape[2]
	}
	if d != c.DIn {
		return 0, fmt.Errorf("d_in mismatch: input last dim %d, layer expects d_in %d", d, c.DIn)
	}
	total := new(big.Int)
	total.Add(product(2, b, t, c.DIn, 3, c.DOut), product(4, b, t, t, c.DOut))
	if !total.IsInt64() {
		return 0, fmt.Errorf("the FLOP count for input shape %v overflows an int64", shape)
	}
	return total.Int64(), nil
}

// product multiplies ints without overflow.
func product(factors ...int) *big.Int {
	p := big.NewInt(1)
	for _, f := range factors {
		p.Mul(p, big.NewInt(int64(f)))
	}
	return p
}
