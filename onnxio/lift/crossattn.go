package lift

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// paddingMask is a mask computed from a graph input of shape (B, S): key j
// of sequence b is masked where input[b, j] is true ("bool"), or gets
// input[b, j] added to its scores ("float"), as nn.MultiheadAttention's
// key_padding_mask.
type paddingMask struct {
	input string
	kind  string
}

// maskNodes lists the nodes that compute a mask from the graph inputs.
func (a *analysis) maskNodes(v string) []*node {
	var out []*node
	seen := map[string]bool{}
	var walk func(string)
	walk = func(v string) {
		if seen[v] || !a.g.IsData(v) {
			return
		}
		seen[v] = true
		if n := a.g.Producer(v); n != nil {
			out = append(out, n)
			for _, in := range n.GetInput() {
				walk(in)
			}
		}
	}
	walk(v)
	return out
}

// paddingMaskAt checks at a probe that the masks computed from inputs are a
// key padding mask: it feeds a random pattern and compares what the graph
// masks with what the pattern says, for every (sequence, head, query, key).
func (l *attentionLayer) paddingMaskAt(p *probe, hs heads, scoreShape []int, tokK tokens) (paddingMask, error) {
	g := l.a.g
	var km paddingMask
	var values []string
	for _, d := range l.sc.dynamic {
		deps := g.DependsOnInputs(d.value)
		if len(deps) != 1 || km.input != "" && deps[0] != km.input {
			return km, fmt.Errorf("the scores are masked by values computed from inputs %s; a padding mask comes from one input", quoted(deps))
		}
		km.input = deps[0]
		values = append(values, d.value)
	}
	if km.input == l.srcQ.tokens || km.input == l.srcK.tokens {
		return km, fmt.Errorf("the scores are masked by values computed from the tokens %q themselves", km.input)
	}
	feed := p.feeds[km.input]
	shape := []int(feed.Shape())
	S := tokK.T
	if !(equalShapes(shape, []int{tokK.B, S}) || len(shape) == 1 && tokK.B == 1 && shape[0] == S) {
		return km, fmt.Errorf("mask input %q has shape %s; a key padding mask is (batch, keys) = (%d, %d)", km.input, fmtShape(shape), tokK.B, S)
	}
	rng := rand.New(rand.NewPCG(7, uint64(S)))
	pattern := make([]float64, product(shape))
	var override *tensor.Dense
	switch dt := feed.Dtype(); dt {
	case tensor.Bool:
		km.kind = "bool"
		b := make([]bool, len(pattern))
		for i := range b {
			b[i] = rng.Float64() < 0.4
			if b[i] {
				pattern[i] = 1
			}
		}
		override = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(b))
	case tensor.Float32:
		km.kind = "float"
		f := make([]float32, len(pattern))
		for i := range f {
			f[i] = float32(rng.NormFloat64())
			pattern[i] = float64(f[i])
		}
		override = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f))
	default:
		return km, fmt.Errorf("mask input %q is %v; a key padding mask is bool or float32", km.input, dt)
	}
	outs, err := p.run(g.Model.GetGraph().GetNode(), nil, values, map[string]*tensor.Dense{km.input: override})
	if err != nil {
		return km, err
	}
	n := product(scoreShape)
	Tq, Tk := scoreShape[len(scoreShape)-2], scoreShape[len(scoreShape)-1]
	hidden := make([]bool, n)
	added := make([]float64, n)
	for _, d := range l.sc.dynamic {
		t := outs[d.value]
		ts := []int(t.Shape())
		if t.IsScalar() {
			ts = nil
		}
		if !broadcasts(ts, scoreShape) {
			return km, fmt.Errorf("mask %q of shape %s does not fit the scores of shape %s", d.value, fmtShape(ts), fmtShape(scoreShape))
		}
		vals, err := match.Floats(t)
		if err != nil {
			return km, err
		}
		for i := range hidden {
			x := vals[broadcastIndex(i, scoreShape, ts)]
			switch {
			case d.kind == maskWhereTrue:
				hidden[i] = hidden[i] || x != 0
			case d.kind == maskWhereFalse:
				hidden[i] = hidden[i] || x == 0
			case km.kind == "bool" && x <= masked:
				hidden[i] = true
			case km.kind == "bool" && x != 0:
				return km, fmt.Errorf("the mask from %q adds %g to some scores: a score bias, not a padding mask", km.input, x)
			default:
				added[i] += x
			}
		}
	}
	for i := range hidden {
		grp, q, k := i/(Tq*Tk), (i/Tk)%Tq, i%Tk
		want := pattern[hs.seq[grp]*S+k]
		if km.kind == "bool" && hidden[i] != (want != 0) || km.kind == "float" && (hidden[i] || added[i] != want) {
			return km, fmt.Errorf("the mask from %q is not a key padding mask: query %d, key %d of sequence %d, head %d does not follow %s[%d, %d]",
				km.input, q, k, hs.seq[grp], hs.head[grp], km.input, hs.seq[grp], k)
		}
	}
	return km, nil
}

// torchMHA lifts cross-attention, or attention with a key padding mask, as
// nn.MultiheadAttention does them: attention.torch_mha, batch first, with
// the query, the memory (for cross-attention) and the mask as inputs.
func (l *attentionLayer) torchMHA(r *region, tokQ, tokK tokens, hs heads, out *linear, scale float64, causal bool, kpm paddingMask) error {
	var what []string
	if l.cross() {
		what = append(what, fmt.Sprintf("cross-attention (queries from %q, keys and values from %q)", l.srcQ.tokens, l.srcK.tokens))
	}
	if kpm.input != "" {
		what = append(what, fmt.Sprintf("a key padding mask from input %q", kpm.input))
	}
	desc := joinAnd(what)
	if !registered("attention.torch_mha") {
		return fmt.Errorf("%s: no layer type attention.torch_mha is registered in this build", desc)
	}
	if causal {
		return fmt.Errorf("%s together with a causal mask: attention.torch_mha takes masks as inputs, not a causal flag", desc)
	}
	if out == nil {
		return fmt.Errorf("%s without an output projection: attention.torch_mha has out_proj", desc)
	}
	E := hs.H * hs.dk
	if tokQ.D != E || out.dIn != E {
		return fmt.Errorf("%s: queries of width %d give %d heads of %d; attention.torch_mha needs embed_dim = num_heads·head_dim", desc, tokQ.D, hs.H, hs.dk)
	}
	if !scaledAs(scale, hs.dk) {
		return fmt.Errorf("%s: the scores are scaled by %g; attention.torch_mha scales by 1/√head_dim = 1/√%d", desc, scale, hs.dk)
	}
	lins := []*linear{l.srcQ.lin, l.srcK.lin, l.srcV.lin, out}
	bias := out.bias != nil
	for _, lin := range lins {
		if (lin.bias != nil) != bias {
			return fmt.Errorf("%s: some projections have a bias and some do not; nn.MultiheadAttention's bias is all or none", desc)
		}
	}
	kdim := tokK.D
	segs := []int{hs.segQ, hs.segK, hs.segV}
	var ps []param
	if kdim == E {
		w := param{name: "in_proj_weight"}
		b := param{name: "in_proj_bias"}
		var wRows, bRows []*tensor.Dense
		for i, lin := range lins[:3] {
			lo, hi := segs[i], segs[i]+E
			wRows = append(wRows, rows(lin.weight, lo, hi))
			w.pieces = append(w.pieces, lin.weightPiece(lo, hi, lo == 0 && hi == lin.dOut))
			if bias {
				bRows = append(bRows, rows(lin.bias, lo, hi))
				b.pieces = append(b.pieces, lin.biasPiece(lo, hi, lo == 0 && hi == lin.dOut))
			}
		}
		w.value = stackRows(wRows)
		ps = append(ps, w)
		if bias {
			b.value = stackRows(bRows)
			ps = append(ps, b)
		}
	} else {
		var bRows []*tensor.Dense
		b := param{name: "in_proj_bias"}
		for i, name := range []string{"q_proj_weight", "k_proj_weight", "v_proj_weight"} {
			lin, lo := lins[i], segs[i]
			ps = append(ps, param{name: name, value: rows(lin.weight, lo, lo+E), pieces: []piece{lin.weightPiece(lo, lo+E, lo == 0 && lo+E == lin.dOut)}})
			if bias {
				bRows = append(bRows, rows(lin.bias, lo, lo+E))
				b.pieces = append(b.pieces, lin.biasPiece(lo, lo+E, lo == 0 && lo+E == lin.dOut))
			}
		}
		if bias {
			b.value = stackRows(bRows)
			ps = append(ps, b)
		}
	}
	ps = append(ps, out.params("out_proj.")...)
	average := true
	for _, w := range r.weights {
		average = average && w.mean
	}
	r.typ, r.params = "attention.torch_mha", ps
	r.fields = []field{{"embed_dim", E}, {"num_heads", hs.H}, {"bias", bias}}
	if kdim != E {
		r.fields = append(r.fields, field{"kdim", kdim}, field{"vdim", kdim})
	}
	r.fields = append(r.fields, field{"batch_first", len(mustShape(l.a.probes[0], l.srcQ.tokens)) == 3})
	if kpm.input != "" {
		r.fields = append(r.fields, field{"key_padding_mask", kpm.kind})
	}
	if !average {
		r.fields = append(r.fields, field{"average_attn_weights", false})
	}
	r.inputs = []string{l.srcQ.tokens}
	if l.cross() {
		r.inputs = append(r.inputs, l.srcK.tokens)
	}
	if kpm.input != "" {
		r.inputs = append(r.inputs, kpm.input)
	}
	return nil
}

// stackRows concatenates matrices or vectors along their first axis.
func stackRows(ts []*tensor.Dense) *tensor.Dense {
	var data []float32
	n := 0
	for _, t := range ts {
		data = append(data, t.Data().([]float32)...)
		n += t.Shape()[0]
	}
	if ts[0].Dims() == 1 {
		return tensor.New(tensor.WithShape(n), tensor.WithBacking(data))
	}
	return tensor.New(tensor.WithShape(n, ts[0].Shape()[1]), tensor.WithBacking(data))
}

// joinAnd joins phrases with commas and "and".
func joinAnd(parts []string) string {
	switch len(parts) {
	case 0:
		return "attention"
	case 1:
		return parts[0]
	}
	return fmt.Sprintf("%s and %s", joinComma(parts[:len(parts)-1]), parts[len(parts)-1])
}

func joinComma(parts []string) string {
	out := parts[0]
	for _, p := range parts[1:] {
		out += ", " + p
	}
	return out
}
