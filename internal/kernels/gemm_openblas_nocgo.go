//go:build openblas && !cgo

package kernels

// The openblas build tag links OpenBLAS through cgo. Without cgo it would
// silently build the pure-Go kernels alone; this file makes that a compile
// error that says why instead ("undefined: openblasTagNeedsCgo...").
var _ = openblasTagNeedsCgo_SetCGO_ENABLED1_AndInstallLibopenblasDev
