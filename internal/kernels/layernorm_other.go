//go:build !amd64

package kernels

// layerNormRowVector reports false off amd64: the Go code normalizes.
func layerNormRowVector(dst, x, res, scale, bias []float32, eps float64) bool { return false }
