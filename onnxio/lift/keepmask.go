package lift

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// KeepMask reads v as Hugging Face's mask of the scores built from its
// attention_mask (match.Graph.KeepMask): at every probe the input is fed a
// pattern in which each sequence keeps its first key and hides its last,
// and v must hide exactly the padding keys, or exactly those and the keys
// after each query. A mask as long as the keys in the graph but longer at
// the probes (gathered to the keys) records that tie (probe_ties.go).
func (g patternGraph) KeepMask(v string) (*match.KeepMask, error) {
	a := g.a
	deps := a.g.DependsOnInputs(v)
	if len(deps) != 1 {
		return nil, fmt.Errorf("the mask %q is computed from inputs %s; a keep mask from one", v, quoted(deps))
	}
	km := &match.KeepMask{Input: deps[0], Causal: true}
	plain := true
	for i, p := range a.probes {
		feed := p.feeds[km.Input]
		t, err := p.value(v)
		if err != nil {
			return nil, err
		}
		ts := []int(t.Shape())
		if feed.Dims() != 2 || len(ts) < 2 || t.IsScalar() {
			return nil, fmt.Errorf("the mask %q of shape %s is not read from a (batch, keys) input: %q is %s", v, fmtShape(ts), km.Input, fmtShape(feed.Shape()))
		}
		tq, tk := ts[len(ts)-2], ts[len(ts)-1]
		if err := a.tieMaskKeys(p, km.Input, tk); err != nil {
			return nil, err
		}
		b, S := feed.Shape()[0], feed.Shape()[1]
		if S < 2 || tq > tk {
			return nil, fmt.Errorf("the mask %q of shape %s does not mask %d sequences of %d keys", v, fmtShape(ts), b, S)
		}
		rng := rand.New(rand.NewPCG(13, uint64(i)))
		keep := make([]bool, b*S)
		for j := range keep { // each sequence keeps its first key and hides its last
			keep[j] = j%S == 0 || j%S != S-1 && rng.Float64() < 0.6
		}
		var override *tensor.Dense
		switch feed.Dtype() {
		case tensor.Int64:
			override = tensor.New(tensor.WithShape(b, S), tensor.WithBacking(onesWhere[int64](keep)))
		case tensor.Int32:
			override = tensor.New(tensor.WithShape(b, S), tensor.WithBacking(onesWhere[int32](keep)))
		case tensor.Float32:
			override = tensor.New(tensor.WithShape(b, S), tensor.WithBacking(onesWhere[float32](keep)))
		default:
			return nil, fmt.Errorf("the mask %q is computed from %q, which is %v; a keep mask is int64, int32 or float32", v, km.Input, feed.Dtype())
		}
		outs, err := p.run(a.g.Model.GetGraph().GetNode(), nil, []string{v}, map[string]*tensor.Dense{km.Input: override})
		if err != nil {
			return nil, err
		}
		vals, err := match.Floats(outs[v])
		if err != nil {
			return nil, err
		}
		heads := 1 // the same mask for every head, or expanded over them
		if len(ts) == 4 {
			heads = ts[1]
		}
		target := []int{b, heads, tq, tk}
		if !broadcasts(ts, target) || len(ts) < 4 && product(ts[:len(ts)-2]) != 1 {
			return nil, fmt.Errorf("the mask %q of shape %s is not (batch, heads, queries, keys) for %d sequences", v, fmtShape(ts), b)
		}
		for j := range product(target) {
			seq, q, k := j/(heads*tq*tk), (j/tk)%tq, j%tk
			x := vals[broadcastIndex(j, target, ts)]
			hidden := x <= masked
			if !hidden && x != 0 {
				return nil, fmt.Errorf("the mask %q adds %g to some scores: a bias, not a keep mask", v, x)
			}
			kept := keep[seq*S+k]
			plain = plain && hidden == !kept
			km.Causal = km.Causal && hidden == (!kept || k > q+tk-tq)
		}
	}
	if !plain && !km.Causal {
		return nil, fmt.Errorf("the mask %q computed from %q hides other keys than the padding ones (and those after each query)", v, km.Input)
	}
	km.Causal = km.Causal && !plain
	return km, nil
}
