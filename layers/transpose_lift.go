package layers

import "github.com/attnrun/attnrun/onnxio/match"

// nn.transpose in ONNX graphs: the lifter swaps an attention's
// (B, T, d) output to the (T, B, d) a sequence-first graph returns with
// the layer registered for Transpose.

func init() {
	match.RegisterOpLayer("Transpose", "nn.transpose")
}
