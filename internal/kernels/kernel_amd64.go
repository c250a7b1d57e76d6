package kernels

import "unsafe"

// availableISAs lists the instruction sets usable on this machine, best
// first; the last is always the portable Go set.
func availableISAs() []*isa {
	var sets []*isa
	if cpu.avx512 {
		sets = append(sets, avx512ISA)
	}
	if cpu.avx2FMA {
		sets = append(sets, avx2ISA)
	}
	return append(sets, goISA)
}

// avx2ISA uses the AVX2+FMA kernels.
var avx2ISA = &isa{
	name:     "avx2",
	gemm:     &avx2Kernel,
	expShift: asmExpShift(expShiftAVX2),
	maxOf:    asmMaxOf(maxOfAVX2),
	scale:    asmScale(scaleAVX2),
	add:      asmAdd(addAVX2),

	interleave: interleave256,
	copyPanel:  copyPanelGo,
}

// avx512ISA uses the AVX-512 kernels; packing uses the AVX2 transposes,
// which every AVX-512 CPU also runs.
var avx512ISA = &isa{
	name:     "avx512",
	gemm:     &avx512Kernel,
	expShift: asmExpShift(expShiftAVX512),
	maxOf:    asmMaxOf(maxOfAVX512),
	scale:    asmScale(scaleAVX512),
	add:      asmAdd(addAVX512),

	interleave: interleave256,
	copyPanel:  copyPanelAVX512,
	dot4:       dot4AVX512Go,
	dotRows:    dotRowsAVX512Go,
}

// The assembly routines take a pointer and a length and check no bounds;
// the adapters below give them the slice signatures of isa and
// microKernel, with the checks the assembly cannot make.

// asmKernel returns k with tile, the assembly function of an mr×nr tile,
// as its tile function.
func asmKernel(k microKernel, tile func(kc int, a *float32, aRow, aCol int, b *float32, bRow int, c *float32, ldc int, alpha, beta float32)) microKernel {
	mr, nr := k.mr, k.nr
	k.tile = func(kc int, a []float32, aRow, aCol int, b []float32, bRow int, c []float32, ldc int, alpha, beta float32) {
		if kc > 0 {
			_ = a[(mr-1)*aRow+(kc-1)*aCol]
			_ = b[(kc-1)*bRow+nr-1]
		}
		_ = c[(mr-1)*ldc+nr-1]
		tile(kc, unsafe.SliceData(a), aRow, aCol, unsafe.SliceData(b), bRow, unsafe.SliceData(c), ldc, alpha, beta)
	}
	return k
}

// asmExpShift adapts an assembly isa.expShift.
func asmExpShift(f func(x *float32, n int, shift float32) float32) func([]float32, float32) float32 {
	return func(x []float32, shift float32) float32 { return f(unsafe.SliceData(x), len(x), shift) }
}

// asmMaxOf adapts an assembly isa.maxOf.
func asmMaxOf(f func(x *float32, n int) float32) func([]float32) float32 {
	return func(x []float32) float32 { return f(unsafe.SliceData(x), len(x)) }
}

// asmScale adapts an assembly isa.scale.
func asmScale(f func(x *float32, n int, alpha float32)) func([]float32, float32) {
	return func(x []float32, alpha float32) { f(unsafe.SliceData(x), len(x), alpha) }
}

// asmAdd adapts an assembly isa.add.
func asmAdd(f func(x, y *float32, n int)) func(x, y []float32) {
	return func(x, y []float32) {
		_ = y[:len(x)]
		f(unsafe.SliceData(x), unsafe.SliceData(y), len(x))
	}
}

// withFromRow sets the kernel's bias-row tile function (microKernel.fromRow).
func (k microKernel) withFromRow(fromRow func(rows, kc int, a []float32, aRow, aCol int, b []float32, bRow int, c []float32, ldc int, alpha, beta float32, row []float32)) microKernel {
	k.fromRow = fromRow
	return k
}

// withRows sets the kernel's short-tile function (microKernel.rows).
func (k microKernel) withRows(rows func(rows, kc int, a []float32, aRow, aCol int, b []float32, bRow int, c []float32, ldc int, alpha, beta float32)) microKernel {
	k.rows = rows
	return k
}
