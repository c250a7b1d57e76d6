package layers

import (
	"fmt"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// attention.torch_mha in ONNX graphs: nn.MultiheadAttention's
// cross-attention, or attention with a key padding mask, which the other
// attention layers do not take.

func init() {
	match.RegisterAttention(match.AttentionBuilder{Name: "attention.torch_mha", Priority: -1, Build: liftTorchMHA})
}

// liftTorchMHA lifts cross-attention or attention with a key padding mask.
func liftTorchMHA(a *match.Attention) (*match.Layer, error) {
	if !a.Cross && a.PaddingMask == "" || grouped(a) {
		return nil, nil
	}
	var what []string
	if a.Cross {
		what = append(what, fmt.Sprintf("cross-attention (queries from %q, keys and values from %q)", a.Queries, a.Keys))
	}
	if a.PaddingMask != "" {
		what = append(what, fmt.Sprintf("a key padding mask from input %q", a.PaddingMask))
	}
	desc := strings.Join(what, " and ")
	E := a.Heads * a.HeadDim
	switch {
	case !a.Registered("attention.torch_mha"):
		return nil, fmt.Errorf("%s: no layer type attention.torch_mha is registered in this build", desc)
	case a.Causal:
		return nil, fmt.Errorf("%s together with a causal mask: attention.torch_mha takes masks as inputs, not a causal flag", desc)
	case a.Out == nil:
		return nil, fmt.Errorf("%s without an output projection: attention.torch_mha has out_proj", desc)
	case a.Width != E || a.Out.In != E || a.Out.Out != E:
		return nil, fmt.Errorf("%s: queries of width %d give %d heads of %d; attention.torch_mha needs embed_dim = num_heads·head_dim", desc, a.Width, a.Heads, a.HeadDim)
	case !scaledAs(a.Scale, a.HeadDim):
		return nil, fmt.Errorf("%s: the scores are scaled by %g; attention.torch_mha scales by 1/√head_dim = 1/√%d", desc, a.Scale, a.HeadDim)
	}
	bias := a.Projections[0].Bias != nil
	for _, lin := range a.Projections {
		if (lin.Bias != nil) != bias {
			return nil, fmt.Errorf("%s: some projections have a bias and some do not; nn.MultiheadAttention's bias is all or none", desc)
		}
	}
	ps := inProjParams(a, E, bias)
	var notes []string
	out := a.Out
	if bias && out.Bias == nil {
		// nn.MultiheadAttention initializes out_proj.bias to zeros, and the
		// dynamo exporter drops an Add of zeros: the bias is zeros.
		zeros := *out
		zeros.Bias = tensor.New(tensor.WithShape(out.Out), tensor.WithBacking(make([]float32, out.Out)))
		out = &zeros
		notes = append(notes, "the graph adds no out_proj bias: out_proj.bias is zeros (nn.MultiheadAttention's initial value, which the exporter drops)")
	}
	if !bias && out.Bias != nil {
		return nil, fmt.Errorf("%s: the output projection has a bias and the input projections do not; nn.MultiheadAttention's bias is all or none", desc)
	}
	ps = append(ps, out.Params("out_proj")...)
	l := &match.Layer{Type: "attention.torch_mha", Params: ps, Inputs: []string{a.Queries}, Notes: notes,
		Config: []match.Field{{Key: "embed_dim", Value: E}, {Key: "num_heads", Value: a.Heads}, {Key: "bias", Value: bias}}}
	if a.KeyWidth != E {
		l.Config = append(l.Config, match.Field{Key: "kdim", Value: a.KeyWidth}, match.Field{Key: "vdim", Value: a.KeyWidth})
	}
	l.Config = append(l.Config, match.Field{Key: "batch_first", Value: a.BatchFirst})
	if a.PaddingMask != "" {
		l.Config = append(l.Config, match.Field{Key: "key_padding_mask", Value: a.PaddingMaskKind})
	}
	if !a.AverageWeights {
		l.Config = append(l.Config, match.Field{Key: "average_attn_weights", Value: false})
	}
	if a.Cross {
		l.Inputs = append(l.Inputs, a.Keys)
	}
	if a.PaddingMask != "" {
		l.Inputs = append(l.Inputs, a.PaddingMask)
	}
	return l, nil
}

// inProjParams lists the query, key and value projections' E rows from
// their heads' first as nn.MultiheadAttention holds them: one
// in_proj_weight when keys and values have the queries' width E, else
// q_proj_weight, k_proj_weight and v_proj_weight; and one in_proj_bias.
func inProjParams(a *match.Attention, E int, bias bool) []match.Param {
	var ps []match.Param
	w := match.Param{Name: "in_proj_weight"}
	b := match.Param{Name: "in_proj_bias"}
	var wRows, bRows []*tensor.Dense
	for i, name := range []string{"q_proj_weight", "k_proj_weight", "v_proj_weight"} {
		lin := a.Projections[i]
		lo, hi := a.Segments[i], a.Segments[i]+E
		split := lo != 0 || hi != lin.Out
		wp := match.Piece{From: lin.WeightFrom, Transposed: lin.Transposed, Lo: lo, Hi: hi, Split: split}
		if a.KeyWidth == E {
			wRows = append(wRows, match.Rows(lin.Weight, lo, hi))
			w.Pieces = append(w.Pieces, wp)
		} else {
			ps = append(ps, match.Param{Name: name, Value: match.Rows(lin.Weight, lo, hi), Pieces: []match.Piece{wp}})
		}
		if bias {
			bRows = append(bRows, match.Rows(lin.Bias, lo, hi))
			b.Pieces = append(b.Pieces, match.Piece{From: lin.BiasFrom, Lo: lo, Hi: hi, Split: split})
		}
	}
	if a.KeyWidth == E {
		w.Value = match.Stack(wRows)
		ps = append(ps, w)
	}
	if bias {
		b.Value = match.Stack(bRows)
		ps = append(ps, b)
	}
	return ps
}
