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
