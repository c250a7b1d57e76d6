//go:build !amd64

package kernels

// cpuFeatures is what the assembly kernels need; off amd64 there are none.
type cpuFeatures struct {
	avx2FMA bool
	avx512  bool
}

// detectCPU reports no vector features: other architectures use the
// portable Go kernels.
func detectCPU() cpuFeatures { return cpuFeatures{} }

// spinPause is a spin-wait loop's pause; portable Go has none to give.
func spinPause() {}
