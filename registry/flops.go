package registry

import "gorgonia.org/tensor"

// FLOPCounter is implemented by layers that can count the floating-point
// operations of a forward pass. `attnrun inspect` and models.Model.Profile
// use it; a layer without it shows an unknown count, not an error.
//
// What is counted, so that every layer counts the same way (the convention
// of fvcore, PyTorch's FlopCounterMode and the scaling-law papers):
//
//   - Matrix products only: an (m×k)·(k×n) product is 2·m·n·k FLOPs, one
//     multiply and one add per multiply-add. This covers the projections
//     (q, k, v, out, nn.Linear, MLPs) and both products of attention, QKᵀ
//     and weights·V.
//   - Attention is counted dense, over all Tq×Tk query-key pairs: a causal
//     mask or a sliding window does not halve it, although attnrun's kernels
//     skip the key tiles a causal mask hides entirely (so a causal layer
//     does a little over half of its attention count).
//   - Elementwise work is not counted: bias and residual adds, scaling,
//     masks, softmax, dropout, normalization, activations, position
//     encodings. It is linear in the number of elements, small next to the
//     products at realistic sizes, and its cost per element depends on the
//     implementation. A layer made only of such work counts 0.
type FLOPCounter interface {
	Layer
	// FLOPs returns the count for a forward pass on inputs of the given
	// shapes, in the order Forward takes them. It returns an error if the
	// shapes do not fit the layer or the count overflows an int64.
	FLOPs(inputs []tensor.Shape) (int64, error)
}
