// Package torchrand reproduces, bit for bit, the random numbers PyTorch 1.13
// draws on the CPU after torch.manual_seed, so that attnrun's seeded
// initialization gives exactly the weights PyTorch would.
//
// A Generator stands for torch's default CPU generator. Each method mirrors
// one PyTorch call on a contiguous float32 (or int64) tensor and consumes the
// generator's stream exactly as that call does, so calls can be replayed in
// the order a PyTorch script makes them:
//
//	torch.manual_seed(s)          New(s) or (*Generator).Seed(s)
//	torch.rand(n)                 Uniform(dst, 0, 1)
//	tensor.uniform_(a, b)         Uniform(dst, a, b)
//	torch.randn(n)                Normal(dst, 0, 1)
//	tensor.normal_(m, s)          Normal(dst, m, s)
//	torch.randint(lo, hi, (n,))   RandInt(dst, lo, hi)
//	nn.Linear(in, out)            Uniform(w, -b, b) with b = registry.LinearInit(in).B,
//	                              then Uniform(bias, -c, c) with c = registry.LinearBiasInit(in).B
//	nn.Embedding(n, d)            Normal(w, 0, 1)
//
// How PyTorch 1.13 turns the stream into numbers (aten/src/ATen/core/
// DistributionsHelper.h, TransformationHelper.h, native/cpu/
// DistributionTemplates.h):
//
//   - The engine is the 32-bit Mersenne Twister (mt19937) seeded from the
//     low 32 bits of the seed. random() is one output; random64() is two,
//     the first in the high half.
//   - A float32 uniform takes the low 24 bits of random() times 2^-24, then
//     x*(to-from)+from in float32. A float64 uniform takes the low 53 bits
//     of random64() times 2^-53.
//   - normal_ on a float32 tensor of at least 16 elements fills the tensor
//     with float32 uniforms, then applies Box–Muller to each block of 16:
//     u1 = 1-d[j] and u2 = d[j+8] give d[j] = r·cos θ and d[j+8] = r·sin θ.
//     When the size is not a multiple of 16 the last 16 elements are drawn
//     again and recomputed. Smaller tensors take the scalar path: Box–Muller
//     in float64 on two float64 uniforms, whose second result (r·sin θ) is
//     kept by the generator and returned by the next scalar draw.
//   - randint reduces random() modulo the range, or random64() when the
//     range is 2^32 or more.
//
// PyTorch compiles these kernels once per CPU capability, and the builds
// differ in their last bits (the AVX2 build fuses multiply-adds and uses
// Cephes polynomials for log, sin and cos), so a Generator follows one
// Kernel. AVX2, the default, is what PyTorch 1.13 runs on any x86-64 CPU
// with AVX2 (it prefers AVX2 even on AVX-512 CPUs) and is reproduced exactly. NoAVX2 is the generic x86-64 build
// (ATEN_CPU_CAPABILITY=default): exact except normal_ on 16 or more
// elements, where PyTorch calls the C library's float32 logf, cosf and sinf,
// which are not correctly rounded and differ between C libraries. ARM builds
// (Apple silicon) are not verified: ARM64 compilers probably fuse
// multiply-adds as the AVX2 build does, and their normal_ on 16 or more
// elements again depends on the platform's logf, cosf and sinf.
//
// The scalar normal path calls log, sin and cos in float64 and rounds the
// result to float32; Go's and the C library's float64 functions may differ
// in the last bit of the float64, which changes the float32 result only when
// the value lies within that bit of a float32 rounding boundary (no such
// case appeared in the goldens nor in 1.3 million scalar draws compared with
// PyTorch).
package torchrand
