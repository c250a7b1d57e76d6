// Package attnmath is the float32 math attention layers are made of,
// for authors of layers outside attnrun: an nn.Linear, a row softmax, and
// attention over the heads of a batch, with masks, a causal frontier,
// grouped key/value heads and the weights when asked. It is a thin,
// checked front of the kernels attnrun's own layers run on (Go assembly
// for AVX2 and AVX-512, a fused flash-style attention), which stay
// internal so that they can change; this API will not.
//
// Everything works on row-major []float32 in the layouts PyTorch uses, so
// a layer's Forward can hand the backing array of a (B, T, d) input to
// Linear, and Linear's outputs to Attend, without reshaping or copying:
//
//	q := make([]float32, rows*dOut)
//	attnmath.Linear(q, x, wq, nil, rows, dIn, dOut)   // q = x W_qᵀ, (B, T, H·dh)
//	...
//	attnmath.Attend(out, q, k, v, attnmath.Attention{Batch: b, Heads: h, Queries: t, Keys: t, HeadDim: dh, Causal: true})
//
// # Numbers
//
// Results equal PyTorch's eager CPU float32 results within float32
// rounding (1e-5 relative, 1e-6 absolute in the tests against PyTorch):
// sums run in float32, in a different order than a naive loop. NaN and
// infinities come out as the PyTorch expression each function names
// produces them (see attnrun's README, "NaN and infinities").
//
// # Errors
//
// Sizes that the slices cannot hold, negative sizes and sizes whose
// products overflow are errors naming the function and the operand; the
// functions never panic on them and write nothing then.
package attnmath
