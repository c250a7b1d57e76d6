package layers

import (
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// norm.layer written as an RMSNorm of the centred input, as Hugging Face
// writes a LayerNorm without bias by hand (Cohere's CohereLayerNorm):
//
//	c = x − ReduceMean(x)
//	y = RMSNorm(c) · w        RMSNorm as match.RMSNorm reads it, or ONNX's
//	                          RMSNormalization op (the dynamo exporter's
//	                          optimizer fuses the variance and rsqrt into it)
//
// which is (x − mean)/√(var + eps)·w: a LayerNorm whose bias is 0. It is
// offered the mean after norm.layer/decomposed, which reads the same
// nodes followed by a bias (BERT's LayerNorm written by hand) whole.

func init() {
	match.RegisterPattern(match.Pattern{Name: "norm.layer/centred-rms", Op: "ReduceMean", Late: true, Priority: 1, Match: liftLayerNormCentred})
}

// liftLayerNormCentred lifts the LayerNorm that starts at the mean.
func liftLayerNormCentred(g match.Graph, mean *match.Node) (*match.Layer, error) {
	x := mean.Inputs()[0]
	if !match.ReducesLastAxis(g, mean) || !g.IsData(x) {
		return nil, nil
	}
	sub := onlyReader(g, mean.Output())
	if sub == nil || sub.Op() != "Sub" || sub.Inputs()[0] != x || sub.Inputs()[1] != mean.Output() {
		return nil, nil
	}
	c := sub.Output()
	readers := g.Readers(c)
	if len(readers) == 1 && readers[0].Op() == "RMSNormalization" {
		r, err := match.MatchRMSNormalization(g, readers[0])
		if err != nil || r == nil {
			return nil, err
		}
		return layerNormLayer(g, []*match.Node{mean, sub, readers[0]}, x, r.Output, r.WeightFrom, "", r.Eps)
	}
	for _, pow := range readers {
		if pow.Op() != "Pow" {
			continue
		}
		r, err := match.MatchRMSNorm(g, pow)
		if r == nil || err != nil || throughCopies(g, r.Input) != c || !readOnlyBy(g, c, r.Nodes) {
			return nil, nil
		}
		return layerNormLayer(g, append([]*match.Node{mean, sub}, r.Nodes...), x, r.Output, r.WeightFrom, "", r.Eps)
	}
	return nil, nil
}

// readOnlyBy reports whether the nodes alone read v.
func readOnlyBy(g match.Graph, v string, nodes []*match.Node) bool {
	for _, r := range g.Readers(v) {
		if !slices.ContainsFunc(nodes, func(n *match.Node) bool { return n.Output() == r.Output() }) {
			return false
		}
	}
	return !g.IsOutput(v)
}
