package layers

import (
	"fmt"
	"reflect"

	"github.com/attnrun/attnrun/onnxio/match"
)

// attention.multihead_wrapper in ONNX graphs: an nn.concat of independent
// attention.causal heads that read the same input (the seeds'
// MultiHeadAttentionWrapper), merged into one layer.

func init() {
	match.RegisterMerge(match.Merge{Name: "attention.multihead_wrapper", Merge: mergeMultiheadWrapper})
}

// mergeMultiheadWrapper merges a Concat of equal causal heads.
func mergeMultiheadWrapper(concat *match.Layer, heads []*match.Layer) *match.Layer {
	if concat.Type != "nn.concat" {
		return nil
	}
	first := heads[0]
	for _, h := range heads {
		if h.Type != "attention.causal" || h.Inputs[0] != first.Inputs[0] || !reflect.DeepEqual(h.Config, first.Config) {
			return nil
		}
	}
	f := first.Config // d_in, d_out, context_length, qkv_bias
	l := &match.Layer{Type: "attention.multihead_wrapper", Name: "attention", Inputs: first.Inputs,
		Config: []match.Field{f[0], f[1], f[2], {Key: "num_heads", Value: len(heads)}, f[3]}}
	for i, h := range heads {
		for _, p := range h.Params {
			p.Name = fmt.Sprintf("heads.%d.%s", i, p.Name)
			l.Params = append(l.Params, p)
		}
	}
	return l
}
