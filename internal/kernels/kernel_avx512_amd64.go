package kernels

import "unsafe"

// avx512Kernel is the AVX-512 micro-kernel: a 12×32 tile of C in 24 ZMM
// accumulators (12 rows × 2 vectors of 16), 2 registers for a row of B
// and 2 for broadcasts of A, out of 32. Each step does 24 FMAs for 2
// loads and 12 broadcasts; on cores with two full-width FMA pipes (Zen 5,
// Intel server parts) that is twice the AVX2 kernel's throughput.
//
// Blocking: kc = 256 makes a B panel 32 KiB, which with one A panel
// (12 KiB) fits a 48 KiB L1 (Zen 4's 32 KiB L1 leaves it to L2, which
// keeps up: the kernel runs at 97% of peak there); nc = 4096 columns of B are packed at once.
// The driver packs up to kcPack = 1024 deep (four blocks of depth, each
// still rounded into C on its own), so that a product of n = 1024 packs A
// and B in one pass and meets its threads twice, not eight times; an A
// block then holds mc·kc floats, 480 KiB of a 1 MiB L2 (120 rows at depth
// 1024). Against packing 256 deep with A blocks of 240 rows, that made
// n = 1024 on 2 threads about 4% faster on the Zen 4 of
// docs/performance.md (round 7), and was no slower at 256, 512 and 2048.
var avx512Kernel = asmKernel(microKernel{
	name: "avx512-12x32",
	mr:   12, nr: 32,
	kc: 256, mc: 480, nc: 4096, kcPack: 1024,
}, tileAVX512OnC).withRows(tileRowsAVX512Go).withFromRow(tileFromRowAVX512)

// tileAVX512 is the assembly tile function (kernel_avx512_amd64.s), with
// the operands addressed as described at microKernel.tile, except that
// C = alpha·A·B + beta·S, S's rows lds apart from s: C itself for the
// tile function, one row of bias (lds = 0) for microKernel.fromRow.
//
//go:noescape
func tileAVX512(kc int, a *float32, aRow, aCol int, b *float32, bRow int, c *float32, ldc int, alpha, beta float32, s *float32, lds int)

// tileAVX512OnC is tileAVX512 with S = C, the micro-kernel's tile.
func tileAVX512OnC(kc int, a *float32, aRow, aCol int, b *float32, bRow int, c *float32, ldc int, alpha, beta float32) {
	tileAVX512(kc, a, aRow, aCol, b, bRow, c, ldc, alpha, beta, c, ldc)
}

// tileFromRowAVX512 is microKernel.fromRow: a full 12-row tile on the
// 12×32 kernel, fewer rows on the few-rows kernel.
func tileFromRowAVX512(rows, kc int, a []float32, aRow, aCol int, b []float32, bRow int, c []float32, ldc int, alpha, beta float32, row []float32) {
	_ = row[31]
	if rows != 12 {
		checkRowsOperands(rows, kc, a, aRow, aCol, b, bRow, c, ldc)
		tileRowsAVX512(rows, kc, unsafe.SliceData(a), aRow, aCol, unsafe.SliceData(b), bRow, unsafe.SliceData(c), ldc, alpha, beta, unsafe.SliceData(row), 0)
		return
	}
	if kc > 0 {
		_ = a[11*aRow+(kc-1)*aCol]
		_ = b[(kc-1)*bRow+31]
	}
	_ = c[11*ldc+31]
	tileAVX512(kc, unsafe.SliceData(a), aRow, aCol, unsafe.SliceData(b), bRow, unsafe.SliceData(c), ldc, alpha, beta, unsafe.SliceData(row), 0)
}
