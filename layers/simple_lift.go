package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/onnxio/match"
)

// attention.simple in ONNX graphs: attention of the tokens with
// themselves, no projections, scaled by 1/√d or not at all.

func init() {
	match.RegisterAttention(match.AttentionBuilder{Name: "attention.simple", Build: liftSimple})
}

// liftSimple lifts an attention without projections.
func liftSimple(a *match.Attention) (*match.Layer, error) {
	if a.Projected || a.Cross || a.PaddingMask != "" {
		return nil, nil
	}
	if !a.SameSource {
		return nil, fmt.Errorf("queries, keys and values are different tensors without projections")
	}
	scaled := scaledAs(a.Scale, a.Width)
	if !scaled && math.Abs(a.Scale-1) > 1e-6 {
		return nil, fmt.Errorf("the scores are scaled by %g; attention.simple scales by 1/√%d or not at all", a.Scale, a.Width)
	}
	return &match.Layer{Type: "attention.simple", Config: []match.Field{{Key: "scaled", Value: scaled}, {Key: "causal", Value: a.Causal}}}, nil
}

// scaledAs compares a score scale with 1/√d.
func scaledAs(scale float64, d int) bool {
	return math.Abs(scale*math.Sqrt(float64(d))-1) < 1e-6
}
