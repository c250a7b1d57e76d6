package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/onnxio/match"
)

// attention.self and attention.causal in ONNX graphs: one head with its
// own query, key and value projections and no output projection. It is
// attention.causal when the mask is cut from a fixed-size buffer and the
// scores are scaled by 1/√d_out, attention.self otherwise.

func init() {
	match.RegisterAttention(match.AttentionBuilder{Name: "attention.self", Priority: 2, Build: liftSingleHead})
}

// liftSingleHead lifts a projected attention without output projection.
func liftSingleHead(a *match.Attention) (*match.Layer, error) {
	if !a.Projected || a.Out != nil || a.Cross || a.PaddingMask != "" {
		return nil, nil
	}
	d := a.HeadDim
	scaled := scaledAs(a.Scale, d)
	if !scaled && math.Abs(a.Scale-1) > 1e-6 {
		return nil, fmt.Errorf("the scores are scaled by %g; attnrun's layers scale by 1/√%d or not at all", a.Scale, d)
	}
	if a.Causal && a.Context > 0 && scaled {
		ps, bias, err := a.QKV("", d, false)
		if err != nil {
			return nil, err
		}
		return &match.Layer{Type: "attention.causal", Params: ps, Config: []match.Field{{Key: "d_in", Value: a.Width}, {Key: "d_out", Value: d},
			{Key: "context_length", Value: a.Context}, {Key: "qkv_bias", Value: bias}}}, nil
	}
	l := &match.Layer{Type: "attention.self"}
	if a.Causal && a.Context > 0 && a.Probes > 1 {
		l.Notes = append(l.Notes, fmt.Sprintf("the graph's mask buffer bounds sequences to %d tokens; attention.self (unscaled, so not attention.causal) accepts longer ones", a.Context))
	}
	matrix := a.Matrix && !a.Biased
	ps, bias, err := a.QKV("", d, matrix)
	if err != nil {
		return nil, err
	}
	weights := "linear"
	if matrix {
		weights = "matrix"
	}
	l.Params = ps
	l.Config = []match.Field{{Key: "d_in", Value: a.Width}, {Key: "d_out", Value: d}, {Key: "weights", Value: weights},
		{Key: "qkv_bias", Value: bias}, {Key: "causal", Value: a.Causal}, {Key: "scaled", Value: scaled}}
	return l, nil
}
