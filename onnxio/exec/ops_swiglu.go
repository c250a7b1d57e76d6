package exec

import "fmt"

// SwiGLU (opset 28) is the gated activation of Llama-style MLPs:
// Y = Swish_alpha(A) · B = A · sigmoid(alpha·A) · B, elementwise, for a
// gate A and a value B of the same shape (the operator does not
// broadcast). alpha defaults to 1.
func init() {
	ops["SwiGLU"] = &opSpec{since: 28, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: swigluOp,
		attrs: map[string]attrKind{"alpha": attrFloat}}
}

// swigluOp is the kernel of SwiGLU. Each float32 element is computed in
// float64 and rounded once.
func swigluOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	a, b := in[0], in[1]
	if !a.dtype.IsFloat() {
		return nil, errDType(a, "float32 or float64")
	}
	if b.dtype != a.dtype {
		return nil, fmt.Errorf("input B is %s and A %s: they must have the same element type", b.describe(), a.describe())
	}
	if !equalShapes(a.shape, b.shape) {
		return nil, fmt.Errorf("inputs A %s and B %s differ in shape; SwiGLU does not broadcast", a.describe(), b.describe())
	}
	y, err := rc.alloc(n, a.dtype, a.shape)
	if err != nil {
		return nil, err
	}
	alpha := float64(n.attrFloat("alpha", 1))
	if a.dtype == Float32 {
		swiglu(y.data.([]float32), a.data.([]float32), b.data.([]float32), alpha)
	} else {
		swiglu(y.data.([]float64), a.data.([]float64), b.data.([]float64), alpha)
	}
	return one(y)
}

// swiglu writes y = a·sigmoid(alpha·a)·b, in float64.
func swiglu[T float](y, a, b []T, alpha float64) {
	for i, x := range a {
		g := float64(x)
		y[i] = T(g * sigmoid(alpha*g) * float64(b[i]))
	}
}
