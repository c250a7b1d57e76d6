package torchrand

import "fmt"

// Kernel selects which of PyTorch's per-CPU builds of the sampling kernels a
// Generator reproduces (see the package documentation).
type Kernel int

const (
	// AVX2 reproduces PyTorch on x86-64 CPUs with AVX2, the build almost
	// every x86-64 machine runs. Exact for every method.
	AVX2 Kernel = iota
	// NoAVX2 reproduces PyTorch's generic x86-64 build (SSE2, no FMA),
	// which runs on CPUs without AVX2 or under ATEN_CPU_CAPABILITY=default.
	// Exact except Normal on 16 or more values, which is within a few
	// float32 ulps: there PyTorch calls the C library's logf, cosf and sinf,
	// which are not correctly rounded.
	NoAVX2
)

// String returns the kernel's name as PyTorch's ATEN_CPU_CAPABILITY spells it.
func (k Kernel) String() string {
	switch k {
	case AVX2:
		return "avx2"
	case NoAVX2:
		return "default"
	}
	return fmt.Sprintf("Kernel(%d)", int(k))
}

// Generator reproduces the stream of torch's default CPU generator. It is NOT
// safe for concurrent use: like PyTorch's generator, the order of draws is
// the result, so share one only under the caller's own lock.
type Generator struct {
	engine mt19937
	kernel Kernel
	// spareNormal is the second value of the last scalar Box–Muller pair,
	// returned by the next scalar normal draw (torch keeps it in the
	// generator as next_double_normal_sample).
	spareNormal    float64
	hasSpareNormal bool
}

// New returns a generator in the state torch.manual_seed(seed) leaves the
// default CPU generator in, reproducing PyTorch's AVX2 build.
func New(seed uint64) *Generator {
	return NewKernel(seed, AVX2)
}

// NewKernel is New for a chosen PyTorch build; it panics on an unknown
// kernel, which is a programming error.
func NewKernel(seed uint64, kernel Kernel) *Generator {
	if kernel != AVX2 && kernel != NoAVX2 {
		panic(fmt.Sprintf("torchrand: unknown kernel %v", kernel))
	}
	g := &Generator{kernel: kernel}
	g.Seed(seed)
	return g
}

// Kernel reports which PyTorch build the generator reproduces.
func (g *Generator) Kernel() Kernel { return g.kernel }

// Seed resets the generator as torch.manual_seed(seed) does, including the
// spare normal sample. Only the low 32 bits of seed matter.
func (g *Generator) Seed(seed uint64) {
	g.engine.seed(seed)
	g.hasSpareNormal = false
	g.spareNormal = 0
}

// Uint32 returns the next 32 random bits (torch's random()).
func (g *Generator) Uint32() uint32 { return g.engine.uint32() }

// Uint64 returns the next 64 random bits built from two 32-bit outputs, the
// first in the high half (torch's random64()).
func (g *Generator) Uint64() uint64 {
	hi := g.engine.uint32()
	lo := g.engine.uint32()
	return uint64(hi)<<32 | uint64(lo)
}

// unitFloat32 returns a float32 uniform in [0, 1) on a 2^-24 grid: the low
// 24 bits of random() scaled, exactly as at::uniform_real_distribution<float>.
func (g *Generator) unitFloat32() float32 {
	return float32(g.engine.uint32()&(1<<24-1)) * (1.0 / (1 << 24))
}

// unitFloat64 returns a float64 uniform in [0, 1) on a 2^-53 grid from the
// low 53 bits of random64(), as at::uniform_real_distribution<double>.
func (g *Generator) unitFloat64() float64 {
	return float64(g.Uint64()&(1<<53-1)) * (1.0 / (1 << 53))
}
