package lift

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// KeepMask reads v as Hugging Face's mask of the scores built from its
// attention_mask (match.Graph.KeepMask): at every probe, and at a long one
// (windowProbe) where a sliding window shows, the input is fed a pattern
// in which each sequence keeps its first key and hides its last, and v
// must hide the padding keys, and of the others exactly those after each
// query (causal) or none, and those a window or more positions back or
// none, or those more than a reach away on either side (a window centred
// on the query: an encoder's local attention, ModernBERT's); queries sit
// at the last positions (bottom-right). A mask as long
// as the keys in the graph but longer at the probes (gathered to the keys)
// records that tie (probe_ties.go).
func (g patternGraph) KeepMask(v string) (*match.KeepMask, error) {
	a := g.a
	deps := a.g.DependsOnInputs(v)
	if len(deps) != 1 {
		return nil, fmt.Errorf("the mask %q is computed from inputs %s; a keep mask from one", v, quoted(deps))
	}
	km := &match.KeepMask{Input: deps[0]}
	long, err := newProbeWith(a.g, windowProbe, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot evaluate the mask %q at %d tokens: %w", v, windowProbe, err)
	}
	var reads []keepRead
	for i, p := range append(append([]*probe(nil), a.probes...), long) {
		r, err := a.readKeepMask(p, v, km.Input, uint64(i))
		if err != nil {
			return nil, err
		}
		reads = append(reads, r)
	}
	future, hiddenFuture := 0, 0
	minBack, maxKept := math.MaxInt, -1
	minAhead, maxKeptAhead := math.MaxInt, -1
	for _, r := range reads {
		future, hiddenFuture = future+r.future, hiddenFuture+r.hiddenFuture
		minBack, maxKept = min(minBack, r.minBack), max(maxKept, r.maxKept)
		minAhead, maxKeptAhead = min(minAhead, r.minAhead), max(maxKeptAhead, r.maxKeptAhead)
	}
	if hiddenFuture != 0 && hiddenFuture != future { // only a centred window hides some keys ahead
		if maxKeptAhead >= minAhead || minBack != minAhead {
			return nil, fmt.Errorf("the mask %q hides some keys after their query and not others: not a causal mask, nor a window centred on the query", v)
		}
		if maxKept >= minBack {
			return nil, fmt.Errorf("the mask %q hides keys %d positions away but keeps some %d back: not a window centred on the query", v, minBack, maxKept)
		}
		km.Window = 2*minBack - 1
		return km, nil
	}
	switch {
	case minBack == 0:
		return nil, fmt.Errorf("the mask %q hides a query's own key", v)
	case minBack != math.MaxInt && maxKept >= minBack:
		return nil, fmt.Errorf("the mask %q hides keys %d positions back but keeps some %d back: not a sliding window", v, minBack, maxKept)
	}
	km.Causal = future > 0 && hiddenFuture == future
	if minBack != math.MaxInt {
		km.Window = minBack
	}
	return km, nil
}

// keepRead is what one probe shows of a keep mask, over the keys the
// pattern keeps: how many lie after their query and how many of those are
// hidden, and the fewest positions back a hidden one lies and the most a
// kept one does, and the same ahead of the query (math.MaxInt and −1 for
// none).
type keepRead struct {
	future, hiddenFuture   int
	minBack, maxKept       int
	minAhead, maxKeptAhead int
}

// readKeepMask evaluates the mask v at probe p with input fed a keep
// pattern, checks that it hides every padding key, and reads the rest.
func (a *analysis) readKeepMask(p *probe, v, input string, seed uint64) (keepRead, error) {
	r := keepRead{minBack: math.MaxInt, maxKept: -1, minAhead: math.MaxInt, maxKeptAhead: -1}
	feed := p.feeds[input]
	if feed.Dims() != 2 || feed.Shape()[1] < 2 {
		return r, fmt.Errorf("the mask %q is computed from %q of shape %s, not (batch, keys)", v, input, fmtShape(feed.Shape()))
	}
	b, S := feed.Shape()[0], feed.Shape()[1]
	rng := rand.New(rand.NewPCG(13, seed))
	keep := make([]bool, b*S)
	for j := range keep { // each sequence keeps its first key and hides its last
		keep[j] = j%S == 0 || j%S != S-1 && rng.Float64() < 0.6
	}
	override, ok := keepTensor(feed.Dtype(), []int{b, S}, keep)
	if !ok || feed.Dtype() == tensor.Bool {
		return r, fmt.Errorf("the mask %q is computed from %q, which is %v; a keep mask is int64, int32 or float32", v, input, feed.Dtype())
	}
	outs, err := p.run(a.g.Model.GetGraph().GetNode(), nil, []string{v}, map[string]*tensor.Dense{input: override})
	if err != nil {
		return r, err
	}
	t := outs[v]
	if t == nil || t.IsScalar() || t.Dims() < 2 {
		return r, fmt.Errorf("the mask %q is not (…, queries, keys)", v)
	}
	ts := []int(t.Shape())
	tq, tk := ts[len(ts)-2], ts[len(ts)-1]
	if err := a.tieMaskKeys(p, input, tk); err != nil {
		return r, err
	}
	heads := 1 // the same mask for every head, or expanded over them
	if len(ts) == 4 {
		heads = ts[1]
	}
	target := []int{b, heads, tq, tk}
	if tq > tk || !broadcasts(ts, target) || len(ts) < 4 && product(ts[:len(ts)-2]) != 1 {
		return r, fmt.Errorf("the mask %q of shape %s is not (batch, heads, queries, keys) for %d sequences of %d keys", v, fmtShape(ts), b, S)
	}
	vals, err := match.Floats(t)
	if err != nil {
		return r, err
	}
	for j := range product(target) {
		seq, q, k := j/(heads*tq*tk), (j/tk)%tq, j%tk
		x := vals[broadcastIndex(j, target, ts)]
		hidden := x <= masked
		switch {
		case !hidden && x != 0:
			return r, fmt.Errorf("the mask %q adds %g to some scores: a bias, not a keep mask", v, x)
		case !keep[seq*S+k]:
			if !hidden {
				return r, fmt.Errorf("the mask %q computed from %q attends to keys %q marks as padding", v, input, input)
			}
			continue
		}
		back := q + tk - tq - k
		switch {
		case back < 0:
			r.future++
			if hidden {
				r.hiddenFuture++
				r.minAhead = min(r.minAhead, -back)
			} else {
				r.maxKeptAhead = max(r.maxKeptAhead, -back)
			}
		case hidden:
			r.minBack = min(r.minBack, back)
		default:
			r.maxKept = max(r.maxKept, back)
		}
	}
	return r, nil
}
