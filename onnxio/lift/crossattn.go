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
	// causal marks a keep mask that also hides the keys after each query
	// (Hugging Face's 4-D causal mask built from the attention_mask).
	causal bool
	// fill is what an "additive" mask adds to the padding keys' scores:
	// (1 - m) * fill, Hugging Face's extended attention mask.
	fill float64
	// context marks a keep mask over the positions of the whole context
	// (contextmask.go), of which the scores read their block.
	context bool
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
	if len(shape) == 4 {
		km.kind, km.context = "keep", true
		return km, l.contextMaskAt(p, hs, scoreShape, tokK.B, km.input, feed)
	}
	if len(shape) == 1 && shape[0] == tokK.B && (feed.Dtype() == tensor.Int32 || feed.Dtype() == tensor.Int64) {
		if ok, err := l.lengthsMaskAt(p, hs, scoreShape, km.input, feed); ok || err != nil {
			km.kind = "lengths"
			return km, err
		}
	}
	if len(shape) == 2 && shape[0] == tokK.B && shape[1] != S && feed.Dtype() != tensor.Bool {
		if err := l.a.tieMaskKeys(p, km.input, S); err != nil { // probe_ties.go: a mask gathered to the keys
			return km, err
		}
	}
	if !(equalShapes(shape, []int{tokK.B, S}) || len(shape) == 1 && tokK.B == 1 && shape[0] == S) {
		return km, fmt.Errorf("mask input %q has shape %s; a key padding mask is (batch, keys) = (%d, %d)", km.input, fmtShape(shape), tokK.B, S)
	}
	if feed.Dtype() != tensor.Bool {
		keep, causal, err := l.keepMaskAt(p, hs, scoreShape, km.input, feed)
		if err == nil && !keep && feed.Dtype() != tensor.Float32 {
			if fill, ok, err := l.fillMaskAt(p, hs, scoreShape, km.input, feed); ok || err != nil {
				km.kind, km.fill = "additive", fill
				return km, err
			}
		}
		if err != nil || keep || feed.Dtype() != tensor.Float32 {
			if err == nil && !keep {
				err = fmt.Errorf("mask input %q is %v and does not hide the keys where it is 0 (adding %g or less to their scores) and only those; a key padding mask of that type is a keep mask", km.input, feed.Dtype(), masked)
			}
			if keep {
				km.kind, km.causal = "keep", causal
			}
			return km, err
		}
	}
	rng := rand.New(rand.NewPCG(7, uint64(S)))
	pattern := make([]float64, product(shape))
	var override *tensor.Dense
	switch feed.Dtype() {
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
	default:
		km.kind = "float"
		f := make([]float32, len(pattern))
		for i := range f {
			f[i] = float32(rng.NormFloat64())
			pattern[i] = float64(f[i])
		}
		override = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f))
	}
	outs, err := p.run(g.Model.GetGraph().GetNode(), nil, values, map[string]*tensor.Dense{km.input: override})
	if err != nil {
		return km, err
	}
	hidden, added, err := l.scoreMasks(p, outs, scoreShape, km.kind == "bool")
	if err != nil {
		return km, fmt.Errorf("the mask from %q %w", km.input, err)
	}
	Tq, Tk := scoreShape[len(scoreShape)-2], scoreShape[len(scoreShape)-1]
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

// keepMaskAt reports whether the masks computed from input (int64, int32
// or float32, (B, S)) follow it as Hugging Face's attention_mask does: a
// key whose entry is 0 gets masked (-10000) or less added to its scores,
// every other key nothing; or, causal, the keys after each query are
// hidden too, as in the 4-D causal mask Hugging Face's decoders build from
// it. It feeds a random pattern of 0s and 1s.
func (l *attentionLayer) keepMaskAt(p *probe, hs heads, scoreShape []int, input string, feed *tensor.Dense) (keeps, causal bool, err error) {
	shape := []int(feed.Shape())
	S := shape[len(shape)-1]
	rng := rand.New(rand.NewPCG(11, uint64(S)))
	if S < 2 {
		return false, false, nil // one key: hiding it cannot be told from a bias
	}
	keep := make([]bool, product(shape))
	for i := range keep { // each sequence keeps its first key and hides its last
		keep[i] = i%S == 0 || i%S != S-1 && rng.Float64() < 0.6
	}
	var override *tensor.Dense
	switch feed.Dtype() {
	case tensor.Int64:
		override = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(onesWhere[int64](keep)))
	case tensor.Int32:
		override = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(onesWhere[int32](keep)))
	case tensor.Float32:
		override = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(onesWhere[float32](keep)))
	default:
		return false, false, fmt.Errorf("mask input %q is %v; a key padding mask is bool, float32, or an int64, int32 or float32 keep mask", input, feed.Dtype())
	}
	if len(l.sc.dynamic) != 1 || l.sc.dynamic[0].kind != maskAdd {
		return false, false, nil
	}
	v := l.sc.dynamic[0].value
	outs, err := p.run(l.a.g.Model.GetGraph().GetNode(), nil, []string{v}, map[string]*tensor.Dense{input: override})
	if err != nil {
		return false, false, err
	}
	t := outs[v]
	ts := []int(t.Shape())
	target, err := l.sc.dynamic[0].shapeAt(p, scoreShape)
	if err != nil {
		return false, false, err
	}
	if t.IsScalar() || !broadcasts(ts, target) {
		return false, false, nil
	}
	vals, err := match.Floats(t)
	if err != nil {
		return false, false, err
	}
	Tq, Tk := scoreShape[len(scoreShape)-2], scoreShape[len(scoreShape)-1]
	plain, causal := true, Tq == Tk
	for i := range product(scoreShape) {
		grp, q, k := i/(Tq*Tk), (i/Tk)%Tq, i%Tk
		x := vals[broadcastIndex(i, target, ts)]
		hidden := x <= masked
		if !hidden && x != 0 {
			return false, false, nil
		}
		kept := keep[hs.seq[grp]*S+k]
		plain = plain && hidden == !kept
		causal = causal && hidden == (!kept || k > q)
	}
	return plain || causal, causal && !plain, nil
}

// keepTensor is a keep mask of shape and element type dt: 1 (true) where
// keep is set, 0 (false) elsewhere; false for a type a keep mask is not
// fed as (float32, int64, int32 or bool).
func keepTensor(dt tensor.Dtype, shape []int, keep []bool) (*tensor.Dense, bool) {
	var backing any
	switch dt {
	case tensor.Float32:
		backing = onesWhere[float32](keep)
	case tensor.Int64:
		backing = onesWhere[int64](keep)
	case tensor.Int32:
		backing = onesWhere[int32](keep)
	case tensor.Bool:
		backing = keep
	default:
		return nil, false
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing)), true
}

// onesWhere is 1 where keep holds and 0 elsewhere.
func onesWhere[T int64 | int32 | float32](keep []bool) []T {
	out := make([]T, len(keep))
	for i, k := range keep {
		if k {
			out[i] = 1
		}
	}
	return out
}

// scoreMasks evaluates the dynamic mask terms computed in outs over the
// scores: which scores they hide and what they add to the others. With
// boolAdds an added value other than 0 or a mask fill is an error.
func (l *attentionLayer) scoreMasks(p *probe, outs map[string]*tensor.Dense, scoreShape []int, boolAdds bool) ([]bool, []float64, error) {
	n := product(scoreShape)
	hidden := make([]bool, n)
	added := make([]float64, n)
	for _, d := range l.sc.dynamic {
		t := outs[d.value]
		ts := []int(t.Shape())
		if t.IsScalar() {
			ts = nil
		}
		target, err := d.shapeAt(p, scoreShape)
		if err != nil {
			return nil, nil, err
		}
		if !broadcasts(ts, target) {
			return nil, nil, fmt.Errorf("gives %q of shape %s, which does not fit the scores of shape %s", d.value, fmtShape(ts), fmtShape(target))
		}
		vals, err := match.Floats(t)
		if err != nil {
			return nil, nil, err
		}
		for i := range hidden {
			x := vals[broadcastIndex(i, target, ts)]
			switch {
			case d.kind == maskWhereTrue:
				hidden[i] = hidden[i] || x != 0
			case d.kind == maskWhereFalse:
				hidden[i] = hidden[i] || x == 0
			case boolAdds && x <= masked:
				hidden[i] = true
			case boolAdds && x != 0:
				return nil, nil, fmt.Errorf("adds %g to some scores: a score bias, not a padding mask", x)
			default:
				added[i] += x
			}
		}
	}
	return hidden, added, nil
}
