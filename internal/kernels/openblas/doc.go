// Package openblas binds the few OpenBLAS functions attnrun compares its
// own kernels with: cblas_sgemm and the library's thread and configuration
// queries. It is compiled only with the openblas build tag and cgo (the
// system library, Debian's libopenblas-dev); otherwise the package is
// empty, and the default build has no cgo.
//
// It is a package of its own because Go does not build cgo and Go
// assembly in one package, and the kernels are assembly.
package openblas
