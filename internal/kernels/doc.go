// Package kernels holds attnrun's float32 compute on plain slices: matrix
// products, softmax and fused attention. Everything is row-major with an
// explicit leading dimension (row stride), so callers can address one head
// inside a wider (T, H·dh) matrix without copying.
package kernels
