package match

import (
	"math"

	"gorgonia.org/tensor"
)

// RMSNorm is weight · x / √(mean(x²) + eps) over the last axis, as
// PyTorch exports it: Pow(x, 2), ReduceMean over the last axis, Add of
// eps, Sqrt, then Div of x (or Reciprocal, or Div of 1, and Mul by x, as
// torch.rsqrt exports), and the Mul by the weight, after a Cast of
// float32 to float32 (Hugging Face's norms compute in float32 and cast
// back). Both norm.rms's lift pattern and
// the lifter's reading of attention.sdpa's per-head qk_norm match it.
type RMSNorm struct {
	// Input and Output are x and the normalized value.
	Input, Output string
	// Width is the normalized (last) axis's size.
	Width int
	// Eps is the epsilon added to the mean square.
	Eps float32
	// Weight is the (Width) weight, ones when the graph multiplies by
	// none; WeightFrom names the graph value it is read from ("" then).
	Weight     *tensor.Dense
	WeightFrom string
	// Nodes are the nodes it is computed by, the Pow first.
	Nodes []*Node
}

// MatchRMSNorm reads the RMSNorm that starts at pow. It returns nil, nil
// when the structure is not one, and a Refusal when its weight is not a
// vector of the normalized width.
func MatchRMSNorm(g Graph, pow *Node) (*RMSNorm, error) {
	ins := pow.Inputs()
	x := ins[0]
	if e, ok := g.ScalarAt(0, ins[1]); !ok || e != 2 || !g.IsData(x) {
		return nil, nil
	}
	mean := OnlyReader(g, pow.Output())
	if mean == nil || mean.Op() != "ReduceMean" || !ReducesLastAxis(g, mean) {
		return nil, nil
	}
	addEps := OnlyReader(g, mean.Output())
	if addEps == nil || addEps.Op() != "Add" {
		return nil, nil
	}
	eps, ok := g.ScalarAt(0, OtherInput(addEps, mean.Output()))
	sqrt := OnlyReader(g, addEps.Output())
	if !ok || sqrt == nil || sqrt.Op() != "Sqrt" {
		return nil, nil
	}
	nodes := []*Node{pow, mean, addEps, sqrt}
	next := OnlyReader(g, sqrt.Output())
	var out string
	switch {
	case next != nil && next.Op() == "Div" && next.Inputs()[0] == x && next.Inputs()[1] == sqrt.Output():
		nodes, out = append(nodes, next), next.Output()
	case next != nil && (next.Op() == "Reciprocal" || isOneOver(g, next, sqrt.Output())):
		mul := OnlyReader(g, next.Output())
		if mul == nil || mul.Op() != "Mul" || OtherInput(mul, next.Output()) != x {
			return nil, nil
		}
		nodes, out = append(nodes, next, mul), mul.Output()
	default:
		return nil, nil
	}
	shape, _ := g.Shape(x)
	width := shape[len(shape)-1]
	ones := make([]float32, width)
	for i := range ones {
		ones[i] = 1
	}
	r := &RMSNorm{Input: x, Width: width, Eps: float32(eps), Weight: tensor.New(tensor.WithShape(width), tensor.WithBacking(ones))}
	if c := OnlyReader(g, out); c != nil && IsFloatCopy(g, c) { // back from float32 (Hugging Face's norms compute in it)
		nodes, out = append(nodes, c), c.Output()
	}
	if m := OnlyReader(g, out); m != nil && m.Op() == "Mul" {
		if w := OtherInput(m, out); w != "" && !g.IsData(w) {
			t, err := g.ValueAt(0, w)
			if err != nil || t.Shape().TotalSize() != width {
				return nil, Refuse(append(nodes, m), "RMSNorm weight %q is not a vector of %d", w, width)
			}
			if r.Weight, err = Float32(t); err != nil {
				return nil, err
			}
			if err := r.Weight.Reshape(width); err != nil {
				return nil, err
			}
			r.WeightFrom = w
			nodes, out = append(nodes, m), m.Output()
		}
	}
	r.Output, r.Nodes = out, nodes
	return r, nil
}

// MatchRMSNormalization reads ONNX's RMSNormalization op (opset 23) over
// the last axis of computed values, with a static scale of its width, as
// an RMSNorm. It returns nil, nil when n is no RMSNormalization of known
// rank, and a *Refusal saying why when it is one that an RMSNorm cannot
// be: over other axes, a computed scale, a scale of another size, or a NaN
// epsilon.
func MatchRMSNormalization(g Graph, n *Node) (*RMSNorm, error) {
	ins := n.Inputs()
	if n.Op() != "RMSNormalization" || len(ins) < 2 || !g.IsData(ins[0]) || ins[1] == "" {
		return nil, nil
	}
	shape, err := g.Shape(ins[0])
	if err != nil || len(shape) == 0 {
		return nil, nil
	}
	nodes := []*Node{n}
	axis := n.Int("axis", -1)
	if axis < 0 {
		axis += int64(len(shape))
	}
	if axis != int64(len(shape)-1) {
		return nil, Refuse(nodes, "RMSNormalization over axes from %d of a rank-%d tensor; an RMSNorm normalizes the last axis", axis, len(shape))
	}
	width := shape[len(shape)-1]
	if g.IsData(ins[1]) {
		return nil, Refuse(nodes, "RMSNormalization scale %q is computed from the inputs; an RMSNorm has a weight", ins[1])
	}
	t, err := g.ValueAt(0, ins[1])
	if err != nil || t.Shape().TotalSize() != width {
		return nil, Refuse(nodes, "RMSNormalization scale %q is not a vector of %d", ins[1], width)
	}
	w, err := Float32(t)
	if err != nil {
		return nil, err
	}
	if err := w.Reshape(width); err != nil {
		return nil, err
	}
	eps := n.Float("epsilon", 1e-5)
	if math.IsNaN(float64(eps)) {
		return nil, Refuse(nodes, "RMSNormalization epsilon is NaN")
	}
	return &RMSNorm{Input: ins[0], Output: n.Output(), Width: width, Eps: eps, Weight: w, WeightFrom: ins[1], Nodes: nodes}, nil
}

// isOneOver reports whether n computes 1 / v: Div(1, v), as the
// TorchScript exporter writes torch.rsqrt's reciprocal.
func isOneOver(g Graph, n *Node, v string) bool {
	if n.Op() != "Div" || n.Inputs()[1] != v {
		return false
	}
	one, ok := g.ScalarAt(0, n.Inputs()[0])
	return ok && one == 1 && !g.IsData(n.Inputs()[0])
}

// IsFloatCopy reports whether n is a Cast of float32 data to float32,
// which changes nothing: Hugging Face's norms cast to float32 and back.
func IsFloatCopy(g Graph, n *Node) bool {
	if n.Op() != "Cast" || n.Int("to", 0) != 1 || !g.IsData(n.Inputs()[0]) {
		return false
	}
	t, err := g.ValueAt(0, n.Inputs()[0])
	return err == nil && t.Dtype() == tensor.Float32
}

// OnlyReader returns the single node that reads v's contents, or nil when
// v has another number of readers or is a graph output.
func OnlyReader(g Graph, v string) *Node {
	rs := g.Readers(v)
	if len(rs) != 1 || g.IsOutput(v) {
		return nil
	}
	return rs[0]
}

// OtherInput returns the input of binary node n that is not v.
func OtherInput(n *Node, v string) string {
	ins := n.Inputs()
	if ins[0] == v {
		return ins[1]
	}
	return ins[0]
}
