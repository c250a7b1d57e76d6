package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
)

var _ registry.Exporter = (*GELU)(nil)

// ExportONNX writes the activation as PyTorch's exporter writes nn.GELU:
// x·0.5·(1 + erf(x/√2)) with Div, Erf, Add and Mul; or, approximate:
// tanh, x·0.5·(1 + tanh(√(2/π)·(x + 0.044715·x³))) with Pow and Tanh.
// (ONNX's own Gelu op arrived only in opset 20.)
func (g *GELU) ExportONNX(b registry.GraphBuilder, inputs []string) (string, error) {
	if g.f.scalar == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	return activationONNX(b, g.Approximate, x)
}

// activationONNX applies one of nn.mlp's activations (gelu, gelu_tanh,
// silu, relu; "none" and "tanh" are activation.gelu's names for the GELUs)
// to x.
func activationONNX(g registry.GraphBuilder, name, x string) (string, error) {
	switch name {
	case "gelu", "none":
		// 0.5·x·(1 + erf(x/√2)), in the order PyTorch writes it.
		e := g.Node("Erf", operands(g.Node("Div", operands(x, g.ScalarFloat(math.Sqrt2)))))
		return geluTail(g, x, e), nil
	case "gelu_tanh", "tanh":
		cube := g.Node("Pow", operands(x, g.ScalarFloat(3)))
		inner := g.Node("Add", operands(x, g.Node("Mul", operands(cube, g.ScalarFloat(0.044715)))))
		t := g.Node("Tanh", operands(g.Node("Mul", operands(inner, g.ScalarFloat(float32(math.Sqrt(2/math.Pi)))))))
		return geluTail(g, x, t), nil
	case "silu":
		return g.Node("Mul", operands(x, g.Node("Sigmoid", operands(x)))), nil
	case "relu":
		return g.Node("Relu", operands(x)), nil
	}
	return "", fmt.Errorf("activation %q has no ONNX export", name)
}

// geluTail is x·(1 + f)·0.5, the end both GELU forms share.
func geluTail(g registry.GraphBuilder, x, f string) string {
	onePlus := g.Node("Add", operands(f, g.ScalarFloat(1)))
	return g.Node("Mul", operands(g.Node("Mul", operands(x, onePlus)), g.ScalarFloat(0.5)))
}
