package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/onnxio/match"
)

// attention.multihead in ONNX graphs: projected queries, keys and values
// split into heads, scaled by 1/√head_dim, merged and projected out.

func init() {
	match.RegisterAttention(match.AttentionBuilder{Name: "attention.multihead", Priority: 1, Build: liftMultihead})
}

// unboundedContext is the context_length given to an attention.multihead
// whose graph bounds the sequence length nowhere (no mask buffer, dynamic
// axes): the layer needs one, and the graph accepts any length.
const unboundedContext = 4096

// liftMultihead lifts projected attention with an output projection.
func liftMultihead(a *match.Attention) (*match.Layer, error) {
	if !a.Projected || a.Out == nil || a.Cross || a.PaddingMask != "" || grouped(a) {
		return nil, nil
	}
	dOut := a.Heads * a.HeadDim
	if !scaledAs(a.Scale, a.HeadDim) {
		return nil, fmt.Errorf("the scores are scaled by %g; attention.multihead scales by 1/√head_dim = 1/√%d", a.Scale, a.HeadDim)
	}
	if a.Out.In != dOut {
		return nil, fmt.Errorf("the output projection takes %d features, the heads give %d", a.Out.In, dOut)
	}
	if a.Out.Out != a.Out.In {
		return nil, nil // pruned heads: attention.sdpa's (sdpa_hf_lift.go)
	}
	ps, bias, err := a.QKV("", dOut, false)
	if err != nil {
		return nil, err
	}
	l := &match.Layer{Type: "attention.multihead", Params: append(ps, a.Out.Params("out_proj")...)}
	ctx := a.Context
	if ctx == 0 {
		ctx = unboundedContext
		if a.Probes == 1 { // the graph fixes the sequence length
			ctx = a.Tokens
		}
		l.Notes = append(l.Notes, fmt.Sprintf("no mask buffer bounds the sequence length; context_length set to %d", ctx))
	}
	l.Config = []match.Field{{Key: "d_in", Value: a.Width}, {Key: "d_out", Value: dOut}, {Key: "context_length", Value: ctx},
		{Key: "num_heads", Value: a.Heads}, {Key: "qkv_bias", Value: bias}, {Key: "out_bias", Value: a.Out.Bias != nil}, {Key: "causal", Value: a.Causal}}
	return l, nil
}
