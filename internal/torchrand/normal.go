package torchrand

import (
	"fmt"
	"math"
)

// vectorMin is the size from which PyTorch's normal_ switches from the
// scalar Box–Muller path to the block-of-16 fill.
const vectorMin = 16

// Normal fills dst as tensor.normal_(mean, std) fills a contiguous float32
// tensor (torch.randn is Normal(dst, 0, 1), nn.Embedding's init is
// Normal(w, 0, 1)). std must be zero or positive, as PyTorch requires.
func (g *Generator) Normal(dst []float32, mean, std float64) error {
	if !(std >= 0) {
		return fmt.Errorf("torchrand: normal expects std >= 0.0, got %v", std)
	}
	if len(dst) >= vectorMin {
		g.normalBlocks(dst, float32(mean), float32(std))
		return nil
	}
	for i := range dst {
		dst[i] = float32(g.scalarNormal(mean, std))
	}
	return nil
}

// scalarNormal draws one value of at::normal_distribution<double>: Box–Muller
// on two float64 uniforms, returning r·cos θ and keeping r·sin θ for the
// next call.
func (g *Generator) scalarNormal(mean, std float64) float64 {
	var z float64
	if g.hasSpareNormal {
		z = g.spareNormal
		g.hasSpareNormal = false
	} else {
		u1 := g.unitFloat64()
		u2 := g.unitFloat64()
		r := math.Sqrt(-2 * math.Log(1-u2))
		theta := 2 * math.Pi * u1
		g.spareNormal = r * math.Sin(theta)
		g.hasSpareNormal = true
		z = r * math.Cos(theta)
	}
	if g.kernel == AVX2 {
		return math.FMA(z, std, mean) // contracted by the AVX2 build
	}
	return float64(z*std) + mean // float64() keeps Go from fusing
}

// normalBlocks is PyTorch's normal_fill: every element first gets a float32
// uniform, then each block of 16 is transformed in place. A ragged tail is
// handled by drawing the last 16 elements again and transforming them, so
// the tail overlaps (and overwrites) part of the last full block.
func (g *Generator) normalBlocks(dst []float32, mean, std float32) {
	for i := range dst {
		dst[i] = g.unitFloat32()
	}
	fill := g.boxMuller16
	n := len(dst)
	for i := 0; i+16 <= n; i += 16 {
		fill(dst[i:i+16], mean, std)
	}
	if n%16 != 0 {
		tail := dst[n-16:]
		for i := range tail {
			tail[i] = g.unitFloat32()
		}
		fill(tail, mean, std)
	}
}

// boxMuller16 transforms 16 uniforms in place into 16 normals: lanes j and
// j+8 form one Box–Muller pair with u1 = 1-d[j] (in (0, 1], safe for log)
// and u2 = d[j+8].
func (g *Generator) boxMuller16(d []float32, mean, std float32) {
	// 2π is computed in float64 and rounded to float32 once, as PyTorch's
	// 2.0f * c10::pi<double>.
	const twoPi = 2 * math.Pi
	for j := 0; j < 8; j++ {
		u1 := 1 - d[j]
		u2 := d[j+8]
		if g.kernel == AVX2 {
			radius := sqrt32(mul32(-2, log8(u1)))
			sin, cos := sincos8(mul32(float32(twoPi), u2))
			d[j] = fma32(mul32(radius, cos), std, mean)
			d[j+8] = fma32(mul32(radius, sin), std, mean)
			continue
		}
		// The generic build calls the C library's logf, cosf and sinf;
		// correctly rounded results stand in for them (see NoAVX2).
		radius := sqrt32(-2 * float32(math.Log(float64(u1))))
		theta := float32(twoPi * float64(u2))
		cos := float32(math.Cos(float64(theta)))
		sin := float32(math.Sin(float64(theta)))
		d[j] = mul32(mul32(radius, cos), std) + mean
		d[j+8] = mul32(mul32(radius, sin), std) + mean
	}
}

// sqrt32 is the correctly rounded float32 square root (vsqrtps): rounding
// the float64 root to float32 is exact because float64 has more than twice
// float32's precision.
func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }
