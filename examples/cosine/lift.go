package cosine

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// This file teaches `attnrun import` to recognize attention.cosine in ONNX
// graphs by structure: PyTorch renames weights (onnx::MatMul_NN) and
// spells shapes as it likes, so nothing here looks at a name. The pattern
// starts from a Softmax the built-in recognizers could not lift and
// accepts
//
//	softmax(scale · normalize(x W_qᵀ + b_q) · normalize(x W_kᵀ + b_k)ᵀ [causal mask]) · (x W_vᵀ + b_v)
//
// where normalize is F.normalize(·, dim=-1) spelled either as PyTorch
// exports it, Div(x, Expand(Clip(ReduceL2(x), 1e-12))), or as ExportONNX
// writes it, Div(x, Max(Sqrt(ReduceSum(x·x)), 1e-12)). The lifter then
// builds the layer and runs it against the graph before it accepts it.

func init() {
	match.RegisterPattern(match.Pattern{Name: "attention.cosine", Op: "Softmax", Match: matchCosine})
}

// errNotCosine is how the helpers below say "not this structure": the
// pattern then declines, and the lifter reports the node as it would
// without it.
var errNotCosine = errors.New("not cosine attention")

// matchCosine is the pattern's Match. It declines (nil, nil) until it has
// seen normalized queries and keys; from there on, anything the layer
// cannot express is an error that names it.
func matchCosine(g match.Graph, softmax *match.Node) (*match.Layer, error) {
	scores, err := g.Scores(softmax)
	if err != nil {
		return nil, nil // no query-key product, or a mask no layer applies: the built-in reason stands
	}
	ins := scores.Product.Inputs()
	qHat, kHatT := ins[0], ins[1]
	kHat, ok := lastTwoSwapped(g, kHatT)
	if !ok {
		return nil, nil
	}
	q, qEps, errQ := normalized(g, qHat)
	k, kEps, errK := normalized(g, kHat)
	if errors.Is(errQ, errNotCosine) || errors.Is(errK, errNotCosine) {
		return nil, nil
	}
	if err := errors.Join(errQ, errK); err != nil {
		return nil, err
	}
	for _, eps := range []float64{qEps, kEps} {
		if math.Abs(eps-normEps) > 1e-6*normEps {
			// The graph holds eps as float32: print it at that precision.
			return nil, fmt.Errorf("queries or keys are normalized with eps %g; attention.cosine uses F.normalize's default %g", float32(eps), normEps)
		}
	}
	if !(scores.Scale > 0) || math.IsInf(scores.Scale, 0) {
		return nil, fmt.Errorf("the cosine scores are scaled by %g; attention.cosine needs a finite scale > 0", scores.Scale)
	}
	pv, err := weightedValues(g, softmax)
	if err != nil {
		return nil, err
	}
	v := pv.Inputs()[1]

	var lins [3]*match.Linear
	for i, p := range []struct{ what, value string }{{"queries", q}, {"keys", k}, {"values", v}} {
		l, ok := g.Linear(p.value)
		if !ok {
			return nil, fmt.Errorf("the %s (%q) are not an nn.Linear of the input", p.what, p.value)
		}
		lins[i] = l
	}
	wq, wk, wv := lins[0], lins[1], lins[2]
	if wq.Input != wk.Input || wk.Input != wv.Input {
		return nil, fmt.Errorf("queries, keys and values project different tensors (%q, %q, %q); attention.cosine is self-attention", wq.Input, wk.Input, wv.Input)
	}
	if wq.Out != wk.Out || wk.Out != wv.Out {
		return nil, fmt.Errorf("queries, keys and values have %d, %d and %d features; attention.cosine gives them one d_out", wq.Out, wk.Out, wv.Out)
	}
	bias := wq.Bias != nil
	if (wk.Bias != nil) != bias || (wv.Bias != nil) != bias {
		return nil, fmt.Errorf("some of the query, key and value projections have a bias and some do not")
	}

	params := wq.Params("W_query")
	params = append(params, wk.Params("W_key")...)
	params = append(params, wv.Params("W_value")...)
	return &match.Layer{
		Type: "attention.cosine",
		Config: []match.Field{
			{Key: "d_in", Value: wq.In},
			{Key: "d_out", Value: wq.Out},
			// The graph holds the scale as float32: printing it at that
			// precision writes 0.3, not 0.30000001192092896.
			{Key: "scale", Value: float32(scores.Scale)},
			{Key: "causal", Value: scores.Causal},
			{Key: "qkv_bias", Value: bias},
		},
		Inputs: []string{wq.Input},
		Output: pv.Output(),
		Params: params,
	}, nil
}

// lastTwoSwapped recognizes a Transpose of the last two axes (PyTorch's
// k.transpose(-2, -1)) and returns what it transposes.
func lastTwoSwapped(g match.Graph, value string) (string, bool) {
	n := g.Producer(value)
	if n == nil || n.Op() != "Transpose" {
		return "", false
	}
	shape, err := g.Shape(value)
	if err != nil || len(shape) < 2 {
		return "", false
	}
	want := make([]int64, len(shape))
	for i := range want {
		want[i] = int64(i)
	}
	last := len(want) - 1
	want[last-1], want[last] = want[last], want[last-1]
	if !slices.Equal(n.Ints("perm"), want) {
		return "", false
	}
	return n.Inputs()[0], true
}

// normalized recognizes value = x / max(‖x‖₂, eps) over the last axis and
// returns x and eps. It returns errNotCosine when value is not a division
// of a tensor by a function of its own norm, and another error when it is
// one that attention.cosine does not compute (a norm over another axis).
func normalized(g match.Graph, value string) (x string, eps float64, err error) {
	div := g.Producer(value)
	if div == nil || div.Op() != "Div" {
		return "", 0, errNotCosine
	}
	x, den := div.Inputs()[0], div.Inputs()[1]
	if !g.IsData(x) || !g.IsData(den) {
		return "", 0, errNotCosine
	}
	clamp := g.Producer(den)
	if clamp != nil && clamp.Op() == "Expand" { // PyTorch's expand_as(x)
		clamp = g.Producer(clamp.Inputs()[0])
	}
	norm, eps, ok := clampedBelow(g, clamp)
	if !ok {
		return "", 0, errNotCosine
	}
	of, axes, ok := l2Norm(g, norm)
	if !ok || of != x {
		return "", 0, errNotCosine
	}
	shape, err := g.Shape(x)
	if err != nil {
		return "", 0, err
	}
	if last := int64(len(shape) - 1); len(axes) != 1 || (axes[0] != -1 && axes[0] != last) {
		return "", 0, fmt.Errorf("%q is normalized over axes %v; attention.cosine normalizes over the last axis (the features)", x, axes)
	}
	return x, eps, nil
}

// clampedBelow recognizes max(v, eps) with eps a constant: Clip(v, eps)
// (torch's clamp_min) or Max(v, eps) in either order.
func clampedBelow(g match.Graph, n *match.Node) (v string, eps float64, ok bool) {
	if n == nil {
		return "", 0, false
	}
	ins := n.Inputs()
	switch n.Op() {
	case "Clip":
		if len(ins) < 2 || (len(ins) > 2 && ins[2] != "") {
			return "", 0, false // no lower bound, or an upper one too
		}
		eps, ok = g.Scalar(ins[1])
		return ins[0], eps, ok
	case "Max":
		if len(ins) != 2 {
			return "", 0, false
		}
		for i := range 2 {
			if eps, ok := g.Scalar(ins[1-i]); ok && g.IsData(ins[i]) {
				return ins[i], eps, true
			}
		}
	}
	return "", 0, false
}

// l2Norm recognizes the L2 norm of a tensor over some axes, kept as axes
// of size 1: ReduceL2(x) or Sqrt(ReduceSum(x·x)). It returns x and the axes.
func l2Norm(g match.Graph, value string) (x string, axes []int64, ok bool) {
	n := g.Producer(value)
	if n == nil {
		return "", nil, false
	}
	switch n.Op() {
	case "ReduceL2":
		x = n.Inputs()[0]
	case "Sqrt":
		sum := g.Producer(n.Inputs()[0])
		if sum == nil || sum.Op() != "ReduceSum" {
			return "", nil, false
		}
		square := g.Producer(sum.Inputs()[0])
		if square == nil || square.Op() != "Mul" || square.Inputs()[0] != square.Inputs()[1] {
			return "", nil, false
		}
		n, x = sum, square.Inputs()[0]
	default:
		return "", nil, false
	}
	if n.Int("keepdims", 1) != 1 {
		return "", nil, false
	}
	axes, ok = reduceAxes(g, n)
	return x, axes, ok
}

// reduceAxes reads a Reduce node's axes: the attribute, or from ReduceSum
// at opset 13 and the other reductions at opset 18 on, the second input.
func reduceAxes(g match.Graph, n *match.Node) ([]int64, bool) {
	if axes := n.Ints("axes"); axes != nil {
		return axes, true
	}
	ins := n.Inputs()
	if len(ins) < 2 || ins[1] == "" {
		return nil, false // all axes
	}
	t, err := g.Constant(ins[1])
	if err != nil {
		return nil, false
	}
	axes, ok := t.Data().([]int64)
	return axes, ok
}

// weightedValues finds the product of the attention weights with the
// values: the softmax's only reader, MatMul(weights, v).
func weightedValues(g match.Graph, softmax *match.Node) (*match.Node, error) {
	weights := softmax.Output()
	if g.IsOutput(weights) {
		return nil, fmt.Errorf("the attention weights %q are a graph output; attention.cosine returns its output only", weights)
	}
	readers := g.Readers(weights)
	if len(readers) != 1 || readers[0].Op() != "MatMul" || readers[0].Inputs()[0] != weights {
		return nil, fmt.Errorf("the attention weights %q are not multiplied with values, and by nothing else", weights)
	}
	return readers[0], nil
}
