package layers

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/attnrun/attnrun/onnxio/match"
)

// attention.sdpa from ONNX's Attention op (opset 23 on): the lifter reads
// the node's attributes, its mask and the projections, RMSNorms and
// RotaryEmbeddings around it (onnxio/lift/attention_op.go); this writes
// what it read as attention.sdpa's config and names its parameters.

func init() {
	match.RegisterOpLayer("Attention", "attention.sdpa", liftSDPAOp)
}

// liftSDPAOp writes the config and parameters of the attention.sdpa an
// Attention node lifts to, leaving out what is attention.sdpa's default.
func liftSDPAOp(op *match.AttentionOp) (*match.Layer, error) {
	cfg := []match.Field{{Key: "d", Value: op.Width}}
	if op.Cross && op.KeyWidth != op.Width {
		cfg = append(cfg, match.Field{Key: "d_memory", Value: op.KeyWidth})
	}
	cfg = append(cfg, match.Field{Key: "num_heads", Value: op.Heads})
	if op.KVHeads != op.Heads {
		cfg = append(cfg, match.Field{Key: "num_kv_heads", Value: op.KVHeads})
	}
	if op.HeadDim*op.Heads != op.Width {
		cfg = append(cfg, match.Field{Key: "head_dim", Value: op.HeadDim})
	}
	cfg = append(cfg, match.Field{Key: "qkv_bias", Value: hasBias(op.Q)})
	if !hasBias(op.Out) {
		cfg = append(cfg, match.Field{Key: "out_bias", Value: false})
	}
	outName := "out_proj"
	if slices.ContainsFunc(op.OutSources, func(s string) bool { return strings.HasSuffix(s, "o_proj.weight") }) {
		outName = "o_proj" // Hugging Face's name survives the round trip
		cfg = append(cfg, match.Field{Key: "out_name", Value: outName})
	}
	if op.Causal {
		cfg = append(cfg, match.Field{Key: "causal", Value: true})
		if op.TopLeft {
			cfg = append(cfg, match.Field{Key: "causal_align", Value: "top_left"})
		}
	}
	if s := float64(op.Scale); s != 0 && math.Abs(s*math.Sqrt(float64(op.HeadDim))-1) > 1e-7 {
		cfg = append(cfg, match.Field{Key: "scale", Value: op.Scale})
	}
	if op.Softcap > 0 {
		cfg = append(cfg, match.Field{Key: "softcap", Value: op.Softcap})
	}
	if op.Window > 0 {
		cfg = append(cfg, match.Field{Key: "window", Value: op.Window})
	}
	switch op.Mask {
	case "":
	case "additive":
		cfg = append(cfg, match.Field{Key: "mask", Value: "additive"})
	default:
		cfg = append(cfg, match.Field{Key: "mask", Value: "bool"}, match.Field{Key: "mask_polarity", Value: op.Mask})
	}
	norm, err := sdpaOpQKNorm(op)
	if err != nil {
		return nil, err
	}
	cfg = append(cfg, norm...)
	l := &match.Layer{Params: slices.Concat(named("q_proj.", op.Q), named("k_proj.", op.K), named("v_proj.", op.V), named(outName+".", op.Out))}
	if op.QNorm != nil {
		l.Params = append(l.Params, match.Param{Name: "q_norm.weight", Value: op.QNorm.Weight, From: op.QNorm.WeightFrom},
			match.Param{Name: "k_norm.weight", Value: op.KNorm.Weight, From: op.KNorm.WeightFrom})
	}
	if r := op.Rope; r != nil {
		cfg = append(cfg, sdpaOpRope(r, op.HeadDim)...)
		if r.Base == 0 {
			l.Notes = append(l.Notes, "one rotating pair turns by its position whatever the base: rope_base is left at 10000")
		} else {
			l.Notes = append(l.Notes, fmt.Sprintf("rope_base %g read from the cos and sin caches", r.Base))
		}
	}
	if op.ALiBi {
		cfg = append(cfg, match.Field{Key: "alibi", Value: true})
	}
	l.Config = cfg
	return l, nil
}

// sdpaOpQKNorm checks that queries and keys are normalized alike, over
// heads or over the whole projections, and returns the qk_norm fields.
func sdpaOpQKNorm(op *match.AttentionOp) ([]match.Field, error) {
	q, k := op.QNorm, op.KNorm
	switch {
	case q == nil && k == nil:
		return nil, nil
	case q == nil || k == nil:
		return nil, errors.New("only one of the queries and keys is normalized: attention.sdpa's qk_norm normalizes both")
	}
	kind, err := qkNormKind(q, k, op.Heads, op.KVHeads, op.HeadDim)
	if err != nil {
		return nil, err
	}
	fields := []match.Field{{Key: "qk_norm", Value: kind}}
	if q.Eps != float32(1e-6) {
		fields = append(fields, match.Field{Key: "qk_norm_eps", Value: q.Eps})
	}
	return fields, nil
}

// sdpaOpRope returns the rope fields of a rotation of heads of headDim.
func sdpaOpRope(r *match.Rope, headDim int) []match.Field {
	style := "half"
	if r.Interleaved {
		style = "interleaved"
	}
	fields := []match.Field{{Key: "rope", Value: style}}
	if r.Base != 0 && r.Base != 10000 {
		fields = append(fields, match.Field{Key: "rope_base", Value: r.Base})
	}
	if r.Dim != headDim {
		fields = append(fields, match.Field{Key: "rope_rotary_dim", Value: r.Dim})
	}
	return fields
}

// named returns ps with their names after prefix.
func named(prefix string, ps []match.Param) []match.Param {
	out := slices.Clone(ps)
	for i := range out {
		out[i].Name = prefix + out[i].Name
	}
	return out
}

// hasBias reports whether a projection's parameters include a bias.
func hasBias(ps []match.Param) bool {
	return slices.ContainsFunc(ps, func(p match.Param) bool { return p.Name == "bias" })
}
