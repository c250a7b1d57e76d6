package lift

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/match"
)

// opMask is what an Attention node's attn_mask lifts to.
type opMask struct {
	// input is the graph input the mask is computed from, "" for none;
	// kind is how: "keep" (bool, nonzero attends), "mask" (bool, nonzero
	// is masked out) or "additive".
	input, kind string
	// causal: the mask hides the keys after each query, aligned
	// bottom-right, or top-left when topLeft is set.
	causal, topLeft bool
	// window > 0: it hides keys window or more positions back, or, when
	// centred, those more than (window − 1)/2 positions away on either
	// side (an encoder's local attention).
	window  int
	centred bool
	// alibi: it adds ALiBi's bias.
	alibi bool
	// padding: the input is a (B, S) keep mask of the keys, Hugging Face's
	// attention_mask, that the graph lays out as (B, 1, …, S); the layer
	// registered by match.RegisterKeepMaskLayer gives it that layout.
	padding bool
}

// mask reads the attn_mask value v of an Attention node over heads query
// heads. Its static part is classified at a long probe (windowProbe), its
// part from an input by feeding that input patterns.
func (l *opLayer) mask(v string, heads int, isCausal, cross bool, tokens []string) (opMask, error) {
	a := l.a
	var m opMask
	l.nodes = append(l.nodes, a.maskNodes(v)...)
	deps := a.g.DependsOnInputs(v)
	switch {
	case len(deps) > 1:
		return m, fmt.Errorf("the mask is computed from inputs %s; attention.sdpa takes one mask input", quoted(deps))
	case len(deps) == 1 && slices.Contains(tokens, deps[0]):
		return m, fmt.Errorf("the mask is computed from the tokens %q themselves", deps[0])
	case len(deps) == 1:
		m.input = deps[0]
	}
	if m.input != "" {
		kind, padding, err := l.maskKind(v, m.input, heads)
		if err != nil {
			return m, err
		}
		m.kind, m.padding = kind, padding
	}
	static, shape, err := l.staticPart(v, m, tokens)
	if err != nil {
		return m, err
	}
	if err := classifyStatic(&m, static, shape, heads, isCausal, cross); err != nil {
		return m, err
	}
	if m.window > 0 && !m.centred && !m.causal && !isCausal {
		return m, fmt.Errorf("the mask hides keys %d or more positions back but not the future: attention.sdpa's window needs causal", m.window)
	}
	if m.causal || m.window > 0 || isCausal {
		l.notes = append(l.notes, fmt.Sprintf("the mask was read at %d tokens: a sliding window of %d or more keys would not show in it", windowProbe, windowProbe))
	}
	return m, nil
}

// maskKind finds how the mask depends on its input: fed zeros, a "keep"
// mask hides everything; fed ones, a "mask" mask does; an additive mask
// adds what it is fed. A random pattern then checks the guess everywhere,
// broadcast from the right as attention.sdpa broadcasts its mask input,
// with the input as large as the graph takes it (see maskInputShape), so
// that a mask the graph reshapes is caught. A (B, S) keep mask the graph
// lays out as (B, 1, …, S), Hugging Face's attention_mask, is read so, and
// padding says so.
func (l *opLayer) maskKind(v, input string, heads int) (kind string, padding bool, err error) {
	p := l.a.probes[0]
	inShape, err := l.maskInputShape(p, v, input, heads)
	if err != nil {
		return "", false, err
	}
	eval := func(fill func(i int) float64) ([]float64, []int, error) {
		return l.evalMask(p, v, input, inShape, fill)
	}
	zeros, shape, err := eval(func(int) float64 { return 0 })
	if err != nil {
		return "", false, err
	}
	ones, _, err := eval(func(int) float64 { return 1 })
	if err != nil {
		return "", false, err
	}
	var static []float64
	switch {
	case allHidden(zeros):
		kind, static = "keep", ones
	case allHidden(ones):
		kind, static = "mask", zeros
	default:
		kind, static = "additive", zeros
		for i, z := range zeros {
			if !math.IsInf(z, -1) && math.Abs(ones[i]-z-1) > 1e-6 {
				return "", false, fmt.Errorf("the mask computed from input %q is neither a bool mask nor added to the scores", input)
			}
		}
	}
	if p.feeds[input].Dtype() == tensor.Bool && kind == "additive" {
		return "", false, fmt.Errorf("the bool input %q is added to the scores", input)
	}
	rng := rand.New(rand.NewPCG(17, uint64(len(static))))
	pattern := make([]float64, product(inShape))
	for i := range pattern {
		if kind == "additive" {
			pattern[i] = math.Round(rng.NormFloat64()*8) / 8 // exact in float32
		} else if rng.Float64() < 0.5 {
			pattern[i] = 1
		}
	}
	got, _, err := eval(func(i int) float64 { return pattern[i] })
	if err != nil {
		return "", false, err
	}
	follows := func(readShape []int) bool {
		if !broadcasts(readShape, shape) {
			return false
		}
		for i, g := range got {
			x := pattern[broadcastIndex(i, shape, readShape)]
			want := static[i]
			switch {
			case kind == "keep" && x == 0, kind == "mask" && x != 0:
				want = math.Inf(-1)
			case kind == "additive":
				want += x
			}
			if !(g == want || math.IsInf(g, -1) && math.IsInf(want, -1) || math.Abs(g-want) <= 1e-5*math.Max(1, math.Abs(want))) {
				return false
			}
		}
		return true
	}
	if kind == "keep" && len(inShape) == 2 && len(shape) > 2 && follows(keyPaddingShape(inShape, len(shape))) {
		return kind, true, l.a.tieMaskKeys(p, input, shape[len(shape)-1]) // probe_ties.go
	}
	if dt := p.feeds[input].Dtype(); dt == tensor.Int64 || dt == tensor.Int32 {
		return "", false, fmt.Errorf("the %v mask input %q is not a (batch, keys) keep mask of the keys, laid out as (batch, 1, …, keys); attention.sdpa reads a float32 or bool mask", dt, input)
	}
	if !broadcasts(inShape, shape) {
		return "", false, fmt.Errorf("the mask input %q of shape %s is reshaped before it masks the scores (%s); attention.sdpa broadcasts its mask from the right",
			input, fmtShape(inShape), fmtShape(shape))
	}
	if !follows(inShape) {
		return "", false, fmt.Errorf("the mask computed from input %q does not follow it as a %s mask broadcast from the right", input, kind)
	}
	return kind, false, nil
}

// keyPaddingShape is the shape a (B, S) key padding mask broadcasts as to
// a mask of the given rank: (B, 1, …, 1, S).
func keyPaddingShape(in []int, rank int) []int {
	out := make([]int, rank)
	for k := range out {
		out[k] = 1
	}
	out[0], out[rank-1] = in[0], in[1]
	return out
}

// maxMaskShapes bounds the shapes maskInputShape tries.
const maxMaskShapes = 1024

// maskInputShape finds the largest shape the graph takes for a mask
// input at a probe: each dimension 1, the number of heads or one of the
// probe's sizes, the most dimensions above 1 winning. A mask declared with
// dimensions of its own (which probes set to 1, see newProbe) can only be
// checked against attention.sdpa's broadcasting at sizes above 1.
func (l *opLayer) maskInputShape(p *probe, v, input string, heads int) ([]int, error) {
	rank := p.feeds[input].Dims()
	sizes := []int{1, heads}
	for _, d := range p.dims {
		if !slices.Contains(sizes, d) {
			sizes = append(sizes, d)
		}
	}
	slices.Sort(sizes)
	best, bestWide := []int(p.feeds[input].Shape()), -1
	combos := 1
	for range rank {
		combos *= len(sizes)
	}
	if combos > maxMaskShapes {
		return best, nil
	}
	for c := range combos {
		shape := make([]int, rank)
		wide, rest := 0, c
		for k := range shape {
			shape[k] = sizes[rest%len(sizes)]
			rest /= len(sizes)
			if shape[k] > 1 {
				wide++
			}
		}
		if wide <= bestWide {
			continue
		}
		if _, _, err := l.evalMask(p, v, input, shape, func(int) float64 { return 1 }); err == nil {
			best, bestWide = shape, wide
		}
	}
	return best, nil
}

// staticPart evaluates the part of the mask that depends on no input at a
// long probe (every symbolic size about windowProbe; sizes only a mask
// input has are 1), feeding the mask input a value that hides nothing.
// It returns the mask as additive values and its shape.
func (l *opLayer) staticPart(v string, m opMask, tokens []string) ([]float64, []int, error) {
	g := l.a.g
	ones := maskOnlyDims(g)
	for _, t := range tokens { // token ids' lengths are the scores' sizes, not a mask's
		for _, in := range g.DependsOnInputs(t) {
			for _, vi := range g.Inputs {
				if vi.GetName() == in {
					for _, d := range onnxio.Dims(vi) {
						delete(ones, d.Param)
					}
				}
			}
		}
	}
	p, err := newProbeWith(g, windowProbe, ones)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot evaluate the mask at %d tokens: %w", windowProbe, err)
	}
	if m.input == "" {
		vals, err := p.run(g.Model.GetGraph().GetNode(), nil, []string{v}, nil)
		if err != nil {
			return nil, nil, err
		}
		return additiveMask(vals[v])
	}
	neutral := 0.0
	if m.kind == "keep" {
		neutral = 1
	}
	return l.evalMask(p, v, m.input, []int(p.feeds[m.input].Shape()), func(int) float64 { return neutral })
}

// evalMask evaluates the mask v at a probe with input fed, in the given
// shape, fill(i) at flat index i, as additive values.
func (l *opLayer) evalMask(p *probe, v, input string, shape []int, fill func(i int) float64) ([]float64, []int, error) {
	feed := p.feeds[input]
	n := product(shape)
	var t *tensor.Dense
	switch feed.Dtype() {
	case tensor.Bool:
		d := make([]bool, n)
		for i := range d {
			d[i] = fill(i) != 0
		}
		t = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	case tensor.Float32:
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(fill(i))
		}
		t = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	case tensor.Int64:
		d := make([]int64, n)
		for i := range d {
			d[i] = int64(fill(i))
		}
		t = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	case tensor.Int32:
		d := make([]int32, n)
		for i := range d {
			d[i] = int32(fill(i))
		}
		t = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	default:
		return nil, nil, fmt.Errorf("mask input %q is %v; a mask is bool, float32, int64 or int32", input, feed.Dtype())
	}
	vals, err := p.run(l.a.g.Model.GetGraph().GetNode(), nil, []string{v}, map[string]*tensor.Dense{input: t})
	if err != nil {
		return nil, nil, err
	}
	return additiveMask(vals[v])
}

// additiveMask reads a mask as what it adds to the scores: a bool mask 0
// where true (attend) and −Inf where false; a float mask its values, −Inf
// for anything at or below masked (−1e9).
func additiveMask(t *tensor.Dense) ([]float64, []int, error) {
	if t == nil {
		return nil, nil, errors.New("the mask could not be evaluated")
	}
	vals, err := match.Floats(t)
	if err != nil {
		return nil, nil, err
	}
	out := make([]float64, len(vals))
	for i, x := range vals {
		switch {
		case t.Dtype() == tensor.Bool && x == 0, x <= masked:
			out[i] = math.Inf(-1)
		case t.Dtype() != tensor.Bool:
			out[i] = x
		}
	}
	shape := []int(t.Shape())
	if t.IsScalar() {
		shape = nil
	}
	return out, shape, nil
}

// allHidden reports whether every score is masked.
func allHidden(vals []float64) bool {
	for _, v := range vals {
		if !math.IsInf(v, -1) {
			return false
		}
	}
	return len(vals) > 0
}

// classifyStatic reads a static additive mask of the given shape
// (broadcasting to (B, heads, Tq, Tk)) as a causal frontier, a window and
// ALiBi, into m. With isCausal the op itself hides the future, top-left.
func classifyStatic(m *opMask, vals []float64, shape []int, heads int, isCausal, cross bool) error {
	if len(shape) < 2 || len(shape) > 4 {
		return fmt.Errorf("the mask has shape %s; want (…, queries, keys)", fmtShape(shape))
	}
	n := len(shape)
	tq, tk := shape[n-2], shape[n-1]
	bs, hs := 1, 1
	if n >= 3 {
		hs = shape[n-3]
	}
	if n == 4 {
		bs = shape[0]
	}
	if hs != 1 && hs != heads {
		return fmt.Errorf("the mask has %d heads, the attention %d", hs, heads)
	}
	at := func(b, h, i, j int) float64 { return vals[((b*hs+h)*tq+i)*tk+j] }
	for b := 1; b < bs; b++ {
		for i := 0; i < hs*tq*tk; i++ {
			if !sameMask(vals[b*hs*tq*tk+i], vals[i]) {
				return errors.New("the mask's constant part differs between sequences")
			}
		}
	}
	offsets := []int{tk - tq, 0} // bottom-right, then top-left
	if isCausal || !cross {
		offsets = []int{0}
	}
	var problem error
	for _, off := range offsets {
		c, err := readFrontier(at, hs, tq, tk, off)
		if err != nil {
			problem = err
			continue
		}
		m.causal, m.window, m.centred = c.causal, c.window, c.centred
		m.topLeft = c.causal && off == 0 && tq != tk
		alibi, err := readALiBi(at, hs, heads, tq, tk, off)
		if err != nil {
			return err
		}
		m.alibi = alibi
		return nil
	}
	return problem
}

// frontier is what a mask hides of the past and the future: the future
// (causal), keys window or more positions back, or, centred, keys more
// than (window − 1)/2 positions away on either side.
type frontier struct {
	causal, centred bool
	window          int
}

// readFrontier reads the hidden keys of every head (they must agree) as a
// causal frontier and a window, query i sitting at position i+off.
func readFrontier(at func(b, h, i, j int) float64, hs, tq, tk, off int) (frontier, error) {
	var f frontier
	hidden := func(i, j int) bool { return math.IsInf(at(0, 0, i, j), -1) }
	for h := 1; h < hs; h++ {
		for i := range tq {
			for j := range tk {
				if math.IsInf(at(0, h, i, j), -1) != hidden(i, j) {
					return f, errors.New("the mask hides different keys in different heads")
				}
			}
		}
	}
	future, hiddenFuture := 0, 0
	minBack, minAhead := math.MaxInt, math.MaxInt
	for i := range tq {
		for j := range tk {
			back := i + off - j
			switch {
			case back < 0:
				future++
				if hidden(i, j) {
					hiddenFuture++
					minAhead = min(minAhead, -back)
				}
			case hidden(i, j):
				minBack = min(minBack, back)
			}
		}
	}
	if hiddenFuture != 0 && hiddenFuture != future {
		return centredWindow(hidden, tq, tk, off, minBack, minAhead)
	}
	f.causal = future > 0 && hiddenFuture == future
	if minBack == math.MaxInt {
		return f, nil
	}
	if minBack == 0 {
		return f, errors.New("the mask hides a query's own key: not a causal or sliding-window mask")
	}
	for i := range tq {
		for j := range tk {
			if back := i + off - j; back >= 0 && hidden(i, j) != (back >= minBack) {
				return f, fmt.Errorf("the mask hides keys %d positions back but not all keys further back: not a sliding window", minBack)
			}
		}
	}
	f.window = minBack
	return f, nil
}

// centredWindow reads a mask that hides some keys after their query and
// not others as a window centred on the query: it hides exactly the keys
// reach = minBack = minAhead or more positions away, on either side.
func centredWindow(hidden func(i, j int) bool, tq, tk, off, minBack, minAhead int) (frontier, error) {
	reach := minBack
	if minBack != minAhead {
		return frontier{}, errors.New("the mask hides some keys after their query and not others: not a causal mask, nor a window centred on the query")
	}
	for i := range tq {
		for j := range tk {
			if away := abs(i + off - j); hidden(i, j) != (away >= reach) {
				return frontier{}, fmt.Errorf("the mask hides keys %d positions away but not all keys further: not a window centred on the query", reach)
			}
		}
	}
	return frontier{centred: true, window: 2*reach - 1}, nil
}

// abs is |x|.
func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// readALiBi checks the values the mask adds where it hides nothing: none,
// or ALiBi's slope_h · (key − query position) for heads heads.
func readALiBi(at func(b, h, i, j int) float64, hs, heads, tq, tk, off int) (bool, error) {
	slopes := alibiSlopes(heads)
	added := false
	for h := range hs {
		for i := range tq {
			for j := range tk {
				v := at(0, h, i, j)
				if math.IsInf(v, -1) {
					continue
				}
				added = added || v != 0
			}
		}
	}
	if !added {
		return false, nil
	}
	if hs != heads {
		return false, errors.New("the mask adds the same values to every head's scores: a score bias, not ALiBi")
	}
	for h := range hs {
		for i := range tq {
			for j := range tk {
				v := at(0, h, i, j)
				want := float64(float32(slopes[h]) * float32(j-(i+off)))
				if !math.IsInf(v, -1) && math.Abs(v-want) > 1e-6*math.Max(1, math.Abs(want)) {
					return false, fmt.Errorf("the mask adds %g to head %d, query %d, key %d, where ALiBi adds %g: a score bias attention.sdpa does not have", v, h, i, j, want)
				}
			}
		}
	}
	return true, nil
}

// sameMask compares two additive mask values.
func sameMask(x, y float64) bool { return x == y || math.IsInf(x, -1) && math.IsInf(y, -1) }

// alibiSlopes returns the ALiBi slopes of n heads, as attnrun's ALiBi
// computes them (Press et al.'s reference code).
func alibiSlopes(n int) []float64 {
	p := 1 << int(math.Floor(math.Log2(float64(n))))
	slopes := make([]float64, 0, n)
	for i := range p {
		slopes = append(slopes, math.Pow(2, -8*float64(i+1)/float64(p)))
	}
	for i := 0; len(slopes) < n; i += 2 {
		slopes = append(slopes, math.Pow(2, -8*float64(i+1)/float64(2*p)))
	}
	return slopes
}
