package layers

import "github.com/attnrun/attnrun/onnxio/match"

// nn.transpose in ONNX graphs: the lifter swaps an attention's
// (B, T, d) output to the (T, B, d) a sequence-first graph returns with
// the layer registered for Transpose.

func init() {
	match.RegisterOpLayer("Transpose", "nn.transpose", liftTranspose)
}

// liftTranspose writes the config of an nn.transpose that swaps t's axes.
func liftTranspose(t match.Transpose) (*match.Layer, error) {
	return &match.Layer{Config: []match.Field{{Key: "dim0", Value: t.Dim0}, {Key: "dim1", Value: t.Dim1}}}, nil
}
