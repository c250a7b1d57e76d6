package kernels

import "unsafe"

// copyRows32AVX512 sets dst[p·32 + c] = src[p·lds + c] for p < rows and
// c < 32: a full 32-column panel of B, packed.
//
//go:noescape
func copyRows32AVX512(dst, src *float32, lds, rows int)

// copyPanelAVX512 is isa.copyPanel for the AVX-512 kernel's 32-column
// panels: full panels in assembly, others with copy.
func copyPanelAVX512(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	if ldd != 32 || cols != 32 {
		copyPanelGo(dst, ldd, src, lds, rows, cols)
		return
	}
	if rows == 0 {
		return
	}
	// The assembly does not bounds-check.
	_ = dst[rows*32-1]
	_ = src[(rows-1)*lds+31]
	copyRows32AVX512(unsafe.SliceData(dst), unsafe.SliceData(src), lds, rows)
}
