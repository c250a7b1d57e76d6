package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/onnxio/match"
)

// attention.sdpa in ONNX graphs, for what the other attention layers do
// not take: attention masked by a keep mask, Hugging Face's attention_mask
// (1 for tokens, 0 for padding; int64, int32 or float32) turned into
// (1 - mask) · -10000 and added to the scores as BERT and GPT-2 do (the
// lifter gives the mask to a mask.padding layer, whose output the
// attention reads with mask: bool and mask_polarity: keep); heads
// narrower than the width (pruned heads: all_head_size below d), whose
// output projection is not square; and grouped-query attention, keys and
// values repeated for groups of query heads (Llama's repeat_kv).

func init() {
	match.RegisterAttention(match.AttentionBuilder{Name: "attention.sdpa/hf", Priority: -1, Build: liftSDPA})
	match.RegisterKeepMaskLayer("mask.padding") // an attention_mask read by ONNX's Attention op
}

// liftSDPA lifts projected self-attention with an output projection, with
// a keep mask, pruned heads, grouped-query attention or a scale other than
// 1/√head_dim.
func liftSDPA(a *match.Attention) (*match.Layer, error) {
	keep := a.PaddingMaskKind == "keep"
	additive := a.PaddingMaskKind == "additive" // mask.additive's (1 - m) * fill
	pruned := a.PaddingMask == "" && a.Out != nil && a.Out.In != a.Out.Out
	rescaled := a.PaddingMask == "" && a.Projected && a.Out != nil && !a.Cross && !scaledAs(a.Scale, a.HeadDim) // fairseq's scaling: sdpa's scale
	shifted := a.ScoreShift != 0                                                                                // score_mod shift
	if !keep && !additive && !pruned && !rescaled && !shifted && !(grouped(a) && a.PaddingMask == "") {
		return nil, nil
	}
	desc := fmt.Sprintf("attention of %d heads of %d over %d features", a.Heads, a.HeadDim, a.Width)
	if keep {
		desc = fmt.Sprintf("attention masked by the keep mask %q", a.PaddingMask)
	}
	E := a.Heads * a.HeadDim
	switch {
	case !a.Registered("attention.sdpa") || keep && !a.Registered(keepMaskLayer(a).Type):
		return nil, fmt.Errorf("%s: this build does not register attention.sdpa and %s", desc, keepMaskLayer(a).Type)
	case !a.Projected || a.Out == nil:
		return nil, fmt.Errorf("%s without query, key, value and output projections: attention.sdpa has them", desc)
	case a.Cross:
		return nil, fmt.Errorf("%s: cross-attention is not lifted to attention.sdpa", desc)
	case a.Out.In != E || a.Out.Out != a.Width:
		return nil, fmt.Errorf("%s: the output projection maps %d to %d features; attention.sdpa's maps the %d head features to d = %d", desc, a.Out.In, a.Out.Out, E, a.Width)
	}
	var ps []match.Param
	bias := a.Projections[0].Bias != nil
	for i, name := range []string{"q_proj", "k_proj", "v_proj"} {
		width := E
		if i > 0 && grouped(a) {
			width = a.KVHeads * a.HeadDim
		}
		lin, lo := a.Projections[i], a.Segments[i]
		if lo+width > lin.Out || (lin.Bias != nil) != bias {
			return nil, fmt.Errorf("%s: %s takes columns %d:%d of a %d-column projection (bias %t); attention.sdpa's has %d, all with a bias or none",
				desc, name, lo, lo+width, lin.Out, lin.Bias != nil, width)
		}
		split := lo != 0 || lo+width != lin.Out
		ps = append(ps, match.Param{Name: name + ".weight", Value: match.Rows(lin.Weight, lo, lo+width),
			Pieces: []match.Piece{{From: lin.WeightFrom, Transposed: lin.Transposed, Lo: lo, Hi: lo + width, Split: split}}})
		if bias {
			ps = append(ps, match.Param{Name: name + ".bias", Value: match.Rows(lin.Bias, lo, lo+width),
				Pieces: []match.Piece{{From: lin.BiasFrom, Lo: lo, Hi: lo + width, Split: split}}})
		}
	}
	l := &match.Layer{Type: "attention.sdpa", Params: append(ps, a.Out.Params("out_proj")...), Inputs: []string{a.Queries},
		Config: []match.Field{{Key: "d", Value: a.Width}, {Key: "num_heads", Value: a.Heads}}}
	if grouped(a) {
		l.Config = append(l.Config, match.Field{Key: "num_kv_heads", Value: a.KVHeads})
	}
	if E != a.Width {
		l.Config = append(l.Config, match.Field{Key: "head_dim", Value: a.HeadDim})
	}
	l.Config = append(l.Config, match.Field{Key: "qkv_bias", Value: bias}, match.Field{Key: "out_bias", Value: a.Out.Bias != nil})
	if !scaledAs(a.Scale, a.HeadDim) {
		l.Config = append(l.Config, match.Field{Key: "scale", Value: a.Scale})
	}
	l.Config = append(l.Config, match.Field{Key: "causal", Value: a.Causal})
	if shifted {
		mods, err := NewScoreMods([]string{"shift"}, []ScoreMod{&ShiftMod{By: a.ScoreShift}})
		if err != nil {
			return nil, err
		}
		l.Config = append(l.Config, match.Field{Key: "score_mod", Value: mods})
	}
	if keep {
		l.Inputs = append(l.Inputs, a.PaddingMask)
		l.Config = append(l.Config, match.Field{Key: "mask", Value: "bool"}, match.Field{Key: "mask_polarity", Value: "keep"})
		l.Before = []*match.Layer{keepMaskLayer(a)}
	}
	if additive {
		l.Inputs = append(l.Inputs, a.PaddingMask)
		l.Config = append(l.Config, match.Field{Key: "mask", Value: "additive"})
		if a.KeepInput != "" {
			l.Before = []*match.Layer{keepMaskLayer(a)}
		}
	}
	return l, nil
}

// keepMaskLayer is the layer that computes an attention's padding mask
// from its keep input: mask.lengths for sequence lengths, mask.additive
// for (1 − m)·fill added to the scores, mask.context for a mask over the
// whole context (which reads the queries for their number), mask.padding
// otherwise.
func keepMaskLayer(a *match.Attention) *match.Layer {
	switch {
	case a.KeepContext:
		return &match.Layer{Type: "mask.context", Name: "mask", Inputs: []string{a.Queries, a.KeepInput}, Output: a.PaddingMask, Nodes: a.KeepNodes}
	case a.KeepLengths != "":
		return &match.Layer{Type: "mask.lengths", Name: "mask", Inputs: []string{a.KeepInput, a.KeepLengths}, Output: a.PaddingMask, Nodes: a.KeepNodes}
	case a.KeepFill != 0:
		return &match.Layer{Type: "mask.additive", Name: "mask", Inputs: []string{a.KeepInput}, Output: a.PaddingMask,
			Config: []match.Field{{Key: "fill", Value: a.KeepFill}}}
	}
	return &match.Layer{Type: "mask.padding", Name: "mask", Inputs: []string{a.KeepInput}, Output: a.PaddingMask}
}

// grouped reports grouped-query attention: fewer key and value heads than
// query heads.
func grouped(a *match.Attention) bool { return a.KVHeads != 0 && a.KVHeads != a.Heads }
