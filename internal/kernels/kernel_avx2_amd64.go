package kernels

// avx2Kernel is the AVX2+FMA micro-kernel: a 6×16 tile of C in 12 YMM
// accumulators (6 rows × 2 vectors of 8), plus 2 registers for a row of B
// and 2 for broadcasts of A, which is all 16 YMM registers. Each step does
// 12 FMAs for 2 loads, enough to keep both FMA pipes busy.
//
// Blocking (Zen 3/4/5: 32–48 KiB L1d, 512 KiB–1 MiB L2 per core): kc = 256
// makes a B panel 16 KiB, so it and two A panels (6 KiB each) stay in L1;
// mc = 144 makes an A block 144 KiB, well inside L2; nc = 4080 makes the
// shared B block 4 MiB, inside L3.
var avx2Kernel = asmKernel(microKernel{
	name: "avx2-6x16",
	mr:   6, nr: 16,
	kc: 256, mc: 144, nc: 4080,
}, tileAVX2)

// tileAVX2 is the assembly tile function (kernel_avx2_amd64.s), with the
// operands addressed as described at microKernel.tile.
//
//go:noescape
func tileAVX2(kc int, a *float32, aRow, aCol int, b *float32, bRow int, c *float32, ldc int, alpha, beta float32)
