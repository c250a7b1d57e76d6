package kernels

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
	expShift: expShift256,
	maxOf:    maxOf256,
	scale:    scale256,
	add:      add256,

	interleave: interleave256,
}

// avx512ISA uses the AVX-512 kernels; packing uses the AVX2 transposes,
// which every AVX-512 CPU also runs.
var avx512ISA = &isa{
	name:     "avx512",
	gemm:     &avx512Kernel,
	expShift: expShift512,
	maxOf:    maxOf512,
	scale:    scale512,
	add:      add512,

	interleave: interleave256,
	dot4:       dot4AVX512Go,
}
