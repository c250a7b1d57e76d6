package lift

import "gorgonia.org/tensor"

// identityOut is the output projection of an attention whose merged heads
// are its output (ONNX Runtime's Attention op, and the graphs its tests
// write unfused): a Linear of width d that reads and writes v and whose
// weight is the identity, which no graph tensor holds.
func identityOut(v string, d int) *linear {
	eye := make([]float32, d*d)
	for i := range d {
		eye[i*d+i] = 1
	}
	return &linear{in: v, out: v, dIn: d, dOut: d, weight: tensor.New(tensor.WithShape(d, d), tensor.WithBacking(eye))}
}
