package layers

import "github.com/attnrun/attnrun/onnxio/match"

// norm.rms in ONNX graphs: match.RMSNorm, anchored at its Pow(x, 2), and
// ONNX's RMSNormalization op.

func init() {
	match.RegisterPattern(match.Pattern{Name: "norm.rms", Op: "Pow", Late: true, Match: liftRMSNorm})
	match.RegisterPattern(match.Pattern{Name: "norm.rms/op", Op: "RMSNormalization", Late: true, Match: liftRMSNormalization})
}

// liftRMSNormalization lifts ONNX's RMSNormalization op (opset 23) over
// the last axis, with its scale as the weight.
func liftRMSNormalization(g match.Graph, n *match.Node) (*match.Layer, error) {
	r, err := match.MatchRMSNormalization(g, n)
	if err != nil || r == nil {
		return nil, err
	}
	return rmsNormLayer(g, r)
}

// liftRMSNorm lifts the RMSNorm that starts at pow.
func liftRMSNorm(g match.Graph, pow *match.Node) (*match.Layer, error) {
	r, err := match.MatchRMSNorm(g, pow)
	if err != nil || r == nil {
		return nil, err
	}
	return rmsNormLayer(g, r)
}

// rmsNormLayer is the norm.rms layer of an RMSNorm read from the graph.
func rmsNormLayer(g match.Graph, r *match.RMSNorm) (*match.Layer, error) {
	if !g.Registered("norm.rms") {
		return nil, match.Refuse(r.Nodes, "RMSNorm: no layer type norm.rms is registered in this build")
	}
	return &match.Layer{Type: "norm.rms", Name: "norm", Inputs: []string{r.Input}, Output: r.Output, Nodes: r.Nodes,
		Config: []match.Field{{Key: "d", Value: r.Width}, {Key: "eps", Value: r.Eps}},
		Params: []match.Param{{Name: "weight", Value: r.Weight, From: r.WeightFrom}}}, nil
}
