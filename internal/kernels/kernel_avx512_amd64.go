package kernels

// avx512Kernel is the AVX-512 micro-kernel: a 12×32 tile of C in 24 ZMM
// accumulators (12 rows × 2 vectors of 16), 2 registers for a row of B
// and 2 for broadcasts of A, out of 32. Each step does 24 FMAs for 2
// loads and 12 broadcasts; on cores with two full-width FMA pipes (Zen 5,
// Intel server parts) that is twice the AVX2 kernel's throughput.
//
// Blocking: kc = 256 makes a B panel 32 KiB, which with one A panel
// (12 KiB) fits a 48 KiB L1; mc = 240 makes an A block 240 KiB of a 1 MiB
// L2; nc = 4096 makes the shared B block 4 MiB of L3.
var avx512Kernel = asmKernel(microKernel{
	name: "avx512-12x32",
	mr:   12, nr: 32,
	kc: 256, mc: 240, nc: 4096,
}, tileAVX512).withRows(tileRowsAVX512Go)

// tileAVX512 is the assembly tile function (kernel_avx512_amd64.s), with
// the operands addressed as described at microKernel.tile.
//
//go:noescape
func tileAVX512(kc int, a *float32, aRow, aCol int, b *float32, bRow int, c *float32, ldc int, alpha, beta float32)
