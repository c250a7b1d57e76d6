package torchrand

import (
	"fmt"
	"math"
)

// Uniform fills dst as tensor.uniform_(from, to) fills a float32 tensor
// (torch.rand is Uniform(dst, 0, 1)): values in [from, to), one random()
// each. It rejects the bounds PyTorch rejects: not finite in float32, from
// greater than to, or a range wider than the largest float32.
func (g *Generator) Uniform(dst []float32, from, to float64) error {
	if err := checkUniformBounds(from, to); err != nil {
		return err
	}
	// PyTorch converts the bounds to the tensor's type first and computes
	// x*(to-from)+from in float32. The AVX2 build is compiled with FMA
	// contraction, so there the product and sum are rounded once.
	lo, hi := float32(from), float32(to)
	width := hi - lo
	for i := range dst {
		x := g.unitFloat32()
		if g.kernel == AVX2 {
			dst[i] = fma32(x, width, lo)
		} else {
			dst[i] = mul32(x, width) + lo
		}
	}
	return nil
}

// checkUniformBounds applies PyTorch's checks in uniform_impl_ for a float32
// tensor.
func checkUniformBounds(from, to float64) error {
	for _, b := range []struct {
		name  string
		value float64
	}{{"from", from}, {"to", to}} {
		if math.IsNaN(b.value) || math.Abs(b.value) > math.MaxFloat32 {
			return fmt.Errorf("torchrand: uniform %s=%v is not a finite float32", b.name, b.value)
		}
	}
	if from > to {
		return fmt.Errorf("torchrand: uniform expects from <= to, got from=%v > to=%v", from, to)
	}
	if float64(float32(to))-float64(float32(from)) > math.MaxFloat32 {
		return fmt.Errorf("torchrand: uniform range [%v, %v) is wider than the largest float32", from, to)
	}
	return nil
}
