package kernels

// cpuid executes the CPUID instruction for a leaf and subleaf.
func cpuid(leaf, subleaf uint32) (eax, ebx, ecx, edx uint32)

// xgetbv0 reads XCR0, the register in which the operating system says
// which vector register files it saves on a context switch.
func xgetbv0() (eax, edx uint32)

// cpuFeatures is what the assembly kernels need from the processor.
type cpuFeatures struct {
	// avx2FMA: 256-bit integer and float vectors with fused multiply-add,
	// and an OS that preserves the YMM registers.
	avx2FMA bool
	// avx512: AVX-512 Foundation, and an OS that preserves the ZMM and
	// opmask registers.
	avx512 bool
}

// detectCPU asks the processor directly, so that the package needs neither
// golang.org/x/sys/cpu nor the runtime's internal/cpu. A CPU flag alone is
// not enough: the OS must also save the wider registers (XCR0), or their
// upper halves would be lost on a context switch.
func detectCPU() cpuFeatures {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return cpuFeatures{}
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const (
		fma     = 1 << 12
		osxsave = 1 << 27
		avx     = 1 << 28
	)
	if ecx1&(fma|osxsave|avx) != fma|osxsave|avx {
		return cpuFeatures{}
	}
	xcr0, _ := xgetbv0()
	const (
		xmmYmm    = 0x6  // SSE and AVX state
		zmmOpmask = 0xe0 // opmask, ZMM0-15 upper halves, ZMM16-31
	)
	if xcr0&xmmYmm != xmmYmm {
		return cpuFeatures{}
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const (
		avx2    = 1 << 5
		avx512f = 1 << 16
	)
	var f cpuFeatures
	f.avx2FMA = ebx7&avx2 != 0
	f.avx512 = f.avx2FMA && ebx7&avx512f != 0 && xcr0&zmmOpmask == zmmOpmask
	return f
}

// spinPause tells the processor that the caller is in a spin-wait loop
// (the PAUSE instruction), which saves power and lets a sibling hardware
// thread run.
func spinPause()
