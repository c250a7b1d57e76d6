package exec

import (
	"encoding/binary"
	"fmt"
)

// Swish (opset 24) and BitCast (opset 26).
func init() {
	ops["Swish"] = &opSpec{since: 24, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: floatAttrOp(swishFunc),
		attrs: map[string]attrKind{"alpha": attrFloat}}
	ops["BitCast"] = &opSpec{since: 26, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: bitCastOp, check: checkBitCast,
		attrs: map[string]attrKind{"to": attrInt}}
}

// swishFunc is Swish: x·sigmoid(alpha·x), alpha 1 by default (SiLU). Its
// ONNX function body casts the float32 alpha to the input's type, as
// float64(alpha) does here.
func swishFunc(n *node) (func(float64) float64, error) {
	alpha := float64(n.attrFloat("alpha", 1))
	return func(x float64) float64 { return x * sigmoid(alpha*x) }, nil
}

// checkBitCast checks that the target type is one the executor holds.
func checkBitCast(n *node) error {
	if !n.has("to") {
		return fmt.Errorf("needs attribute %q", "to")
	}
	return checkDType(DType(n.attrInt("to", 0)))
}

// bitCastOp is the kernel of BitCast: the same bytes, little endian as the
// spec says, read as another type of the same width, in the same shape. A
// byte other than 0 or 1 read as bool is true.
func bitCastOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, to := in[0], DType(n.attrInt("to", 0))
	if x.dtype.size() != to.size() {
		return nil, fmt.Errorf("cannot reinterpret %s (%d bits) as %s (%d bits); BitCast keeps the width", x.dtype, 8*x.dtype.size(), to, 8*to.size())
	}
	out, err := rc.alloc(n, to, x.shape)
	if err != nil {
		return nil, err
	}
	raw, err := binary.Append(make([]byte, 0, x.size()*x.dtype.size()), binary.LittleEndian, x.data)
	if err != nil {
		return nil, err
	}
	if _, err := binary.Decode(raw, binary.LittleEndian, out.data); err != nil {
		return nil, err
	}
	return one(out)
}
