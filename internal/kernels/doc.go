// Package kernels holds attnrun's float32 compute on plain slices: matrix
// products, softmax and fused attention. Everything is row-major with an
// explicit leading dimension (row stride), so callers can address one head
// inside a wider (T, H·dh) matrix without copying.
//
// # Speed
//
// Gemm follows the Goto/BLIS design: operands are packed into cache-sized
// blocks (pack.go) and multiplied by a register-blocked micro-kernel in
// assembly, 12×32 with AVX-512 or 6×16 with AVX2+FMA, with a portable Go
// kernel for other CPUs (kernel*.go). Large products are split over all
// processors (runtime.GOMAXPROCS) by a pool of long-lived workers
// (parallel.go), which spin briefly between calls so that the next one
// starts at once; small ones run on the caller. Products of up to 64
// rows by a weight packed once (packed.go) read A in place and split the
// weight's columns across the threads; one to four rows by an unpacked
// transposed weight are dot products (dots.go). Attend is fused
// (attention_flash.go): scores, mask, an online softmax and the product
// with V are computed tile by tile, so memory grows with T, not T².
// Buffers are reused, so steady-state calls do not allocate.
//
// The instruction set is detected once at start-up with CPUID (cpu_amd64.go);
// ISA reports which one is in use. Setting the environment variable
// ATTNRUN_NOASM=1 before the program starts forces the portable Go kernels,
// to rule the assembly out when chasing a numerical difference.
//
// # Accuracy
//
// Results match a float64 reference within float32 rounding: the kernels
// sum in a different order than a naive loop, so the last bits differ, by
// about 6e-8·√k relative to the sum of the magnitudes of the k terms. The
// exponential is a float32 polynomial accurate to 2 ulp.
//
// # Errors
//
// The kernels are internal and trust their callers for meaning, not for
// memory safety: a size or stride that the slices cannot hold panics with a
// message naming the operand, before any assembly runs.
package kernels
