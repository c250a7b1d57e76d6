package kernels

import (
	"fmt"
	"unsafe"
)

// tileRowsAVX512 is the AVX-512 few-rows kernel (rows_avx512_amd64.s): a
// rows×32 tile of C, rows from 1 to 8, in 2·rows ZMM accumulators. It
// multiplies the rows of A in place (no packing) by one packed 32-column
// panel of B, with the 12×32 kernel's order of operations, so a row gets
// the same bits whichever kernel computes it.
//
//go:noescape
func tileRowsAVX512(rows, kc int, a *float32, aRow, aCol int, b *float32, bRow int, c *float32, ldc int, alpha, beta float32, s *float32, lds int)

// tileRowsAVX512Go checks that the slices hold what the strides address
// (the assembly cannot) and calls tileRowsAVX512 with S = C.
func tileRowsAVX512Go(rows, kc int, a []float32, aRow, aCol int, b []float32, bRow int, c []float32, ldc int, alpha, beta float32) {
	checkRowsOperands(rows, kc, a, aRow, aCol, b, bRow, c, ldc)
	tileRowsAVX512(rows, kc, unsafe.SliceData(a), aRow, aCol, unsafe.SliceData(b), bRow, unsafe.SliceData(c), ldc, alpha, beta, unsafe.SliceData(c), ldc)
}

// checkRowsOperands panics unless the few-rows kernel's operands hold
// what their strides address.
func checkRowsOperands(rows, kc int, a []float32, aRow, aCol int, b []float32, bRow int, c []float32, ldc int) {
	if rows < 1 || rows > maxTileRows {
		panic(fmt.Sprintf("kernels: tileRowsAVX512: %d rows, want 1 to %d", rows, maxTileRows))
	}
	if kc > 0 {
		_ = a[(rows-1)*aRow+(kc-1)*aCol]
		_ = b[(kc-1)*bRow+31]
	}
	_ = c[(rows-1)*ldc+31]
}
