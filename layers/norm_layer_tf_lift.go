package layers

import "github.com/attnrun/attnrun/onnxio/match"

// norm.layer in TensorFlow's graphs (tf.keras LayerNormalization as
// keras2onnx and tf2onnx write it, moments then batchnorm):
//
//	mean = ReduceMean(x); var = ReduceMean((x - mean)·(x - mean))
//	m = Reciprocal(Sqrt(var + eps)) · gamma
//	y = x·m + (beta - mean·m)
//
// which is (x - mean)/√(var + eps)·gamma + beta rearranged.

func init() {
	match.RegisterPattern(match.Pattern{Name: "norm.layer/tensorflow", Op: "ReduceMean", Late: true, Match: liftLayerNormTF})
}

// liftLayerNormTF lifts TensorFlow's layer norm from its first ReduceMean.
func liftLayerNormTF(g match.Graph, mean *match.Node) (*match.Layer, error) {
	x := mean.Inputs()[0]
	if !match.ReducesLastAxis(g, mean) || !g.IsData(x) {
		return nil, nil
	}
	reader := func(v, op string, ok func(*match.Node) bool) *match.Node {
		for _, r := range g.Readers(v) {
			if r.Op() == op && ok(r) {
				return r
			}
		}
		return nil
	}
	sub := reader(mean.Output(), "Sub", func(n *match.Node) bool { return n.Inputs()[0] == x && n.Inputs()[1] == mean.Output() })
	if sub == nil {
		return nil, nil
	}
	square := reader(sub.Output(), "Mul", func(n *match.Node) bool { return n.Inputs()[0] == sub.Output() && n.Inputs()[1] == sub.Output() })
	if square == nil {
		return nil, nil
	}
	variance := onlyReader(g, square.Output())
	if variance == nil || variance.Op() != "ReduceMean" || !match.ReducesLastAxis(g, variance) {
		return nil, nil
	}
	addEps := onlyReader(g, variance.Output())
	if addEps == nil || addEps.Op() != "Add" {
		return nil, nil
	}
	eps, ok := scalarAt(g, otherInput(addEps, variance.Output()))
	sqrt := onlyReader(g, addEps.Output())
	if !ok || sqrt == nil || sqrt.Op() != "Sqrt" {
		return nil, nil
	}
	rstd := onlyReader(g, sqrt.Output())
	if rstd == nil || rstd.Op() != "Reciprocal" {
		return nil, nil
	}
	nodes := []*match.Node{mean, sub, square, variance, addEps, sqrt, rstd}
	m, scale := rstd.Output(), ""
	if gm := onlyReader(g, m); gm != nil && gm.Op() == "Mul" && !g.IsData(otherInput(gm, m)) {
		scale, m = otherInput(gm, m), gm.Output()
		nodes = append(nodes, gm)
	}
	xm := reader(m, "Mul", func(n *match.Node) bool { return otherInput(n, m) == x })
	meanM := reader(m, "Mul", func(n *match.Node) bool { return otherInput(n, m) == mean.Output() })
	if xm == nil || meanM == nil || len(g.Readers(m)) != 2 {
		return nil, nil
	}
	shift := onlyReader(g, meanM.Output())
	if shift == nil || shift.Op() != "Sub" || shift.Inputs()[1] != meanM.Output() || g.IsData(shift.Inputs()[0]) {
		return nil, nil
	}
	out := onlyReader(g, xm.Output())
	if out == nil || out.Op() != "Add" || otherInput(out, xm.Output()) != shift.Output() {
		return nil, nil
	}
	nodes = append(nodes, xm, meanM, shift, out)
	return layerNormLayer(g, nodes, x, out.Output(), scale, shift.Inputs()[0], float32(eps))
}
