package layers

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// The scores and weights of attention.sdpa as exportDecomposed writes
// them (onnxScoreRule): read backwards from the softmax, the causal mask
// (Where(future, −Inf, s)), the score modifications last to first as each
// ScoreMod's ExportONNX writes them, the softcap field, the scale, and the
// product of queries and keys.

// sdpaWeights is what follows the scores: the softmax, its sink column,
// and the product of the weights and the values.
type sdpaWeights struct {
	// scores is the value the softmax normalizes, without the sink column.
	scores string
	// sinks are the sink logits, nil for none; sinksFrom the graph value
	// they are read from.
	sinks     *tensor.Dense
	sinksFrom string
	// product is the MatMul of the weights and the values.
	product *match.Node
	// zeroes records the Where that gives zeros to rows that see no key.
	zeroes bool
}

// readWeights reads the softmax's sink column, if any, and follows its
// weights to the values: through the Slice that drops the sink's weight
// and the Where that gives zeros to rows that see no key (masked_rows:
// zeros). It returns nil when the softmax is not followed so.
func readWeights(g match.Graph, softmax *match.Node) (*sdpaWeights, error) {
	w := &sdpaWeights{scores: softmax.Inputs()[0]}
	weights := softmax.Output()
	if concat := g.Producer(w.scores); concat != nil && concat.Op() == "Concat" && len(concat.Inputs()) == 2 && lastAxis(g, concat) {
		scores, column := concat.Inputs()[0], concat.Inputs()[1]
		slice := match.OnlyReader(g, weights)
		if !g.IsData(scores) || g.IsData(column) || slice == nil || !dropsLastColumn(g, slice) {
			return nil, nil
		}
		sinks, from, err := readSinks(g, column)
		if err != nil {
			return nil, match.Refuse([]*match.Node{concat, softmax}, "softmax with a sink column: %v", err)
		}
		w.scores, w.sinks, w.sinksFrom, weights = scores, sinks, from, slice.Output()
	}
	next := match.OnlyReader(g, weights)
	for next != nil && match.IsFloatCopy(g, next) { // softmax(dtype=float32).to(float32): eager attention
		weights, next = next.Output(), match.OnlyReader(g, next.Output())
	}
	if next != nil && next.Op() == "Where" && zeroesRows(g, next, weights) {
		weights, next, w.zeroes = next.Output(), match.OnlyReader(g, next.Output()), true
	} else if where := zeroesNaN(g, weights); where != nil {
		weights, next, w.zeroes = where.Output(), match.OnlyReader(g, where.Output()), true
	}
	if next == nil || next.Op() != "MatMul" || next.Inputs()[0] != weights {
		if w.sinks != nil {
			return nil, match.Refuse([]*match.Node{softmax}, "softmax with sinks: its weights reach the values through %s, which the lift does not read (a mask input hiding whole rows?)", opName(next))
		}
		return nil, nil
	}
	w.product = next
	return w, nil
}

// zeroesRows reports whether where is Where(condition, weights, 0); the
// condition (computed from the masks) is checked when the layer is run
// against the graph.
func zeroesRows(g match.Graph, where *match.Node, weights string) bool {
	ins := where.Inputs()
	zero, ok := g.Scalar(ins[2])
	return ins[1] == weights && ok && zero == 0
}

// zeroesNaN returns the Where of Where(IsNaN(weights), 0, weights) when
// those two nodes alone read the weights, nil otherwise: PyTorch's
// decomposition of scaled_dot_product_attention gives zeros to a row
// whose every key is masked (softmax of −Inf only is NaN), as attention.sdpa
// does; the lifted layer is checked against the graph.
func zeroesNaN(g match.Graph, weights string) *match.Node {
	rs := g.Readers(weights)
	if len(rs) != 2 || g.IsOutput(weights) {
		return nil
	}
	isNaN, where := rs[0], rs[1]
	if isNaN.Op() != "IsNaN" {
		isNaN, where = where, isNaN
	}
	if isNaN.Op() != "IsNaN" || where.Op() != "Where" || len(g.Readers(isNaN.Output())) != 1 || g.IsOutput(isNaN.Output()) {
		return nil
	}
	ins := where.Inputs()
	zero, ok := g.Scalar(ins[1])
	if len(ins) != 3 || ins[0] != isNaN.Output() || ins[2] != weights || !ok || zero != 0 {
		return nil
	}
	return where
}

// readMaskInput reads the step n of the scores if it applies attention.sdpa's
// mask input: Where(hidden, −Inf, s) with hidden Equal(mask, 0) (mask:
// bool, mask_polarity: keep) or its Not (polarity mask), either joined by
// Or to a static causal mask, or Add(s, mask) (mask: additive), the mask
// added to ALiBi's bias of the alibi field if any. It returns the scores
// before the step and whether n is such a step.
func (s *sdpaScores) readMaskInput(g match.Graph, n *match.Node) (string, bool, error) {
	ins := n.Inputs()
	switch {
	case n.Op() == "Where" && len(ins) == 3 && g.IsData(ins[0]) && g.IsData(ins[2]):
		fill, ok := g.Scalar(ins[1])
		if !ok || !math.IsInf(fill, -1) {
			return "", false, nil
		}
		hidden := ins[0]
		if or := g.Producer(hidden); or != nil && or.Op() == "Or" {
			positional, rest := or.Inputs()[0], or.Inputs()[1]
			if g.IsData(positional) {
				positional, rest = rest, positional
			}
			window, topLeft, ok := causalWindow(g, positional)
			if g.IsData(positional) || !ok {
				return "", false, fmt.Errorf("the scores are masked by %s (Or), not the causal mask or window and a mask input", or.Name())
			}
			s.causal, s.window, s.topLeft, hidden = true, window, topLeft, rest
		}
		input, polarity := boolMaskInput(g, hidden)
		if input == "" {
			return "", false, fmt.Errorf("the scores are masked by %q, not a mask input compared with 0", hidden)
		}
		s.mask, s.maskPolarity, s.maskInput = "bool", polarity, input
		return ins[2], true, nil
	case n.Op() == "Add" && len(ins) == 2 && g.IsData(ins[0]) && g.IsData(ins[1]):
		scores, mask := ins[0], ins[1]
		if g.Producer(mask) != nil && g.Producer(scores) == nil {
			scores, mask = mask, scores
		}
		if add := g.Producer(mask); add != nil && add.Op() == "Add" { // ALiBi's bias + the mask input
			input, alibi, ok := dataAndStatic(g, add)
			if bias := g.Producer(alibi); !ok || bias == nil || bias.Op() != "Mul" || g.Producer(input) != nil {
				return "", false, nil
			}
			if field, err := readALiBi(g, g.Producer(alibi)); err != nil || !field {
				return "", false, err
			}
			s.alibi, mask = true, input
		}
		if g.Producer(mask) != nil {
			return s.readKeepMask(g, ins)
		}
		s.mask, s.maskInput = "additive", mask
		return scores, true, nil
	}
	return "", false, nil
}

// readKeepMask reads Add(scores, mask) with the mask computed from
// Hugging Face's attention_mask (match.Graph.KeepMask), either operand:
// the layer reads it through mask.padding (keepInput) as a keep mask, its
// causal part as causal. The value the layer reads is the bool condition of
// the mask's Where(keep, 0, −Inf) when this layer alone adds it (the
// TorchScript exporter writes a Where per layer), so that the layers share
// the condition's mask.padding; else the added value.
func (s *sdpaScores) readKeepMask(g match.Graph, add []string) (string, bool, error) {
	var first error
	for k := range 2 {
		scores, mask := add[1-k], add[k]
		if n := g.Producer(mask); n == nil || n.Op() == "MatMul" { // the product of queries and keys
			continue
		}
		km, err := g.KeepMask(mask)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		s.mask, s.maskPolarity, s.maskInput, s.keepInput = "bool", "keep", mask, km.Input
		switch {
		case km.Window > 0 && s.window > 0:
			return "", false, fmt.Errorf("the mask %q hides keys beyond a window of %d, and the scores are windowed already; attention.sdpa has one window", mask, km.Window)
		case km.Window > 0 && !km.Causal && s.causal:
			return "", false, fmt.Errorf("the mask %q is a window of %d centred on the query, over causal scores; attention.sdpa's window looks back with causal", mask, km.Window)
		}
		s.causal = s.causal || km.Causal
		if km.Window > 0 {
			s.window = km.Window
		}
		if where := g.Producer(mask); where != nil && where.Op() == "Where" && len(g.Readers(mask)) == 1 && !g.IsOutput(mask) {
			zero, ok0 := g.Scalar(where.Inputs()[1])
			fill, ok1 := g.Scalar(where.Inputs()[2])
			if ok0 && ok1 && zero == 0 && math.IsInf(fill, -1) && g.IsData(where.Inputs()[0]) {
				s.maskInput = where.Inputs()[0]
			}
		}
		return scores, true, nil
	}
	return "", false, first
}

// boolMaskInput reads Equal(mask, 0) (polarity keep: zero hides) or
// Not(Equal(mask, 0)) (polarity mask) of a graph input; "" when hidden is
// neither.
func boolMaskInput(g match.Graph, hidden string) (input, polarity string) {
	polarity = "keep"
	eq := g.Producer(hidden)
	if eq != nil && eq.Op() == "Not" {
		polarity, eq = "mask", g.Producer(eq.Inputs()[0])
	}
	if eq == nil || eq.Op() != "Equal" {
		return "", ""
	}
	m, zero := eq.Inputs()[0], eq.Inputs()[1]
	if g.IsData(zero) {
		m, zero = zero, m
	}
	if z, ok := g.Scalar(zero); !ok || z != 0 || g.Producer(m) != nil || !g.IsData(m) {
		return "", ""
	}
	return m, polarity
}

// readScores follows the scores back to the product of queries and keys
// and the projections. It returns what it read before an error, so that
// the caller knows whether the scores were modified.
func readScores(g match.Graph, v string) (*sdpaScores, error) {
	s, product, err := readScoreSteps(g, v)
	if err != nil {
		return s, err
	}
	return s, s.readHeads(g, product)
}

// readScoreSteps follows the scores back through the causal mask, score
// modifications, softcap and scale to the product of queries and keys.
func readScoreSteps(g match.Graph, v string) (*sdpaScores, *match.Node, error) {
	s := &sdpaScores{scale: 1}
	var caps []float64 // soft caps, last first: the field or score_mods
	var mods []ScoreMod
	var types []string
	var params [][]match.Param
	push := func(typ string, m ScoreMod, ps []match.Param) {
		types, mods, params = append(types, typ), append(mods, m), append(params, ps)
	}
	for {
		n := g.Producer(v)
		if n == nil || !g.IsData(v) {
			return s, nil, fmt.Errorf("no product of queries and keys computes the scores")
		}
		if n.Op() == "MatMul" {
			break
		}
		if s.mask == "" && len(mods) == 0 { // the mask input is applied after every score_mod
			scores, ok, err := s.readMaskInput(g, n)
			if err != nil {
				return s, nil, err
			}
			if ok {
				v = scores
				continue
			}
		}
		if n.Op() == "Tanh" { // a cap of 1: 1·tanh(s/1), the exporter drops both 1s
			s.touched = true
			caps = append(caps, 1)
			push("softcap", &SoftcapMod{Cap: 1}, nil)
			v = n.Inputs()[0]
			continue
		}
		data, arg, ok := dataAndStatic(g, n)
		if !ok {
			return s, nil, fmt.Errorf("the scores pass through %s (%s), which attention.sdpa's lift does not read", n.Name(), n.Op())
		}
		// a bias, or a Where that keeps where its condition holds (the
		// causal mask hides where it holds): score_mod's forms
		s.touched = s.touched || n.Op() == "Add" || n.Op() == "Where" && data == n.Inputs()[1]
		switch n.Op() {
		case "Mul", "Div":
			c, ok := g.Scalar(arg)
			if !ok {
				return s, nil, fmt.Errorf("the scores are scaled by %q, not a constant scalar", arg)
			}
			if tanh := g.Producer(data); n.Op() == "Mul" && tanh != nil && tanh.Op() == "Tanh" {
				s.touched = true
				inner, ok := softCapped(g, tanh, c)
				if !ok {
					return s, nil, fmt.Errorf("the scores pass through %s (Tanh) other than as cap·tanh(s/cap)", tanh.Name())
				}
				caps = append(caps, c)
				push("softcap", &SoftcapMod{Cap: shortFloat(c)}, nil)
				v = inner
				continue
			}
			if n.Op() == "Div" {
				c = 1 / c
			}
			s.scale *= c
		case "Where":
			ins := n.Inputs()
			if fill, ok := g.Scalar(ins[1]); ok && math.IsInf(fill, -1) && data == ins[2] {
				window, topLeft, ok := causalWindow(g, ins[0])
				if s.causal || len(mods) > 0 || !ok {
					return s, nil, fmt.Errorf("the scores are masked by %s (Where), which hides other keys than a causal mask with a window", n.Name())
				}
				s.causal, s.window, s.topLeft = true, window, topLeft
				break
			}
			m, err := readDocumentMask(g, n)
			if err != nil {
				return s, nil, err
			}
			push("document_mask", m, nil)
		case "Add":
			bias := g.Producer(arg)
			switch {
			case uniform(g, arg) != nil:
				push("shift", &ShiftMod{By: *uniform(g, arg)}, nil)
			case bias != nil && bias.Op() == "Gather":
				m, p, err := readRelativeBias(g, bias)
				if err != nil {
					return s, nil, err
				}
				push("relative_bias", m, []match.Param{p})
			case bias != nil && bias.Op() == "Mul":
				field, err := readALiBi(g, bias)
				if err != nil {
					return s, nil, err
				}
				if field && len(mods) == 0 && !s.alibi { // the field's bias is added after every score_mod
					s.alibi = true
					break
				}
				push("alibi", &ALiBiMod{}, nil)
			default:
				m, p, err := readDistanceBias(g, arg)
				if err != nil {
					return s, nil, fmt.Errorf("the scores are added %q, neither ALiBi's nor a relative bias: %v", arg, err)
				}
				push("relative_bias", m, []match.Param{p})
			}
		default:
			return s, nil, fmt.Errorf("the scores pass through %s (%s), which attention.sdpa's lift does not read", n.Name(), n.Op())
		}
		v = data
	}
	slices.Reverse(mods)
	slices.Reverse(types)
	slices.Reverse(params)
	if len(caps) == len(mods) && len(caps) == 1 {
		s.softcap = caps[0] // a cap alone is the softcap field, as Gemma 2 has it
	} else {
		s.mods, s.modTypes, s.modParams = mods, types, params
	}
	return s, g.Producer(v), nil
}

// uniform returns the finite number the static value v holds in every
// element at every probe size, nil when it holds others.
func uniform(g match.Graph, v string) *float64 {
	var by *float64
	for i := range g.Probes() {
		t, err := g.ValueAt(i, v)
		if err != nil {
			return nil
		}
		f, err := match.Floats(t)
		if err != nil || len(f) == 0 || by != nil && f[0] != *by ||
			slices.ContainsFunc(f, func(x float64) bool { return x != f[0] || math.IsInf(x, 0) || math.IsNaN(x) }) {
			return nil
		}
		by = &f[0]
	}
	return by
}

// dataAndStatic returns the data input of a binary step and its static
// other operand (a Where's condition), and whether n is such a step.
func dataAndStatic(g match.Graph, n *match.Node) (data, arg string, ok bool) {
	ins := n.Inputs()
	switch n.Op() {
	case "Mul", "Add", "Div":
		if len(ins) != 2 {
			return "", "", false
		}
		if g.IsData(ins[0]) && !g.IsData(ins[1]) {
			return ins[0], ins[1], true
		}
		if n.Op() != "Div" && g.IsData(ins[1]) && !g.IsData(ins[0]) {
			return ins[1], ins[0], true
		}
	case "Where":
		if len(ins) == 3 && !g.IsData(ins[0]) && g.IsData(ins[1]) != g.IsData(ins[2]) {
			if g.IsData(ins[1]) {
				return ins[1], ins[0], true
			}
			return ins[2], ins[0], true
		}
	}
	return "", "", false
}

// softCapped reads Tanh(Div(s, cap)) and returns s.
func softCapped(g match.Graph, tanh *match.Node, c float64) (string, bool) {
	div := g.Producer(tanh.Inputs()[0])
	if div == nil || div.Op() != "Div" {
		return "", false
	}
	d, ok := g.Scalar(div.Inputs()[1])
	return div.Inputs()[0], ok && d == c && g.IsData(div.Inputs()[0])
}

// shortFloat is a float32 constant as the shortest float64 that rounds to
// it: a cap of 0.3, not 0.30000001192092896.
func shortFloat(c float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(c, 'g', -1, 32), 64)
	return f
}

// readDocumentMask reads Where(Equal(doc[query], doc[key]), s, −Inf): the
// table of document ids of DocumentMaskMod, whose runs are the lengths.
func readDocumentMask(g match.Graph, where *match.Node) (*DocumentMaskMod, error) {
	ins := where.Inputs()
	fill, ok := g.Scalar(ins[2])
	eq := g.Producer(ins[0])
	if !ok || !math.IsInf(fill, -1) || eq == nil || eq.Op() != "Equal" {
		return nil, fmt.Errorf("the scores are masked by %s (Where) other than by a causal or document mask", where.Name())
	}
	gather := g.Producer(eq.Inputs()[0])
	if gather == nil || gather.Op() != "Gather" {
		return nil, fmt.Errorf("the mask of %s compares no table of document ids", where.Name())
	}
	t, err := g.Constant(gather.Inputs()[0])
	if err != nil {
		return nil, fmt.Errorf("the document ids of %s: %v", where.Name(), err)
	}
	ids, err := match.Floats(t)
	if err != nil || len(ids) == 0 || ids[0] != 0 {
		return nil, fmt.Errorf("the document ids of %s do not start at document 0", where.Name())
	}
	lengths := []int{1}
	for i := 1; i < len(ids); i++ {
		switch ids[i] - ids[i-1] {
		case 0:
			lengths[len(lengths)-1]++
		case 1:
			lengths = append(lengths, 1)
		default:
			return nil, fmt.Errorf("the document ids of %s do not number documents one after another", where.Name())
		}
	}
	return &DocumentMaskMod{Lengths: lengths}, nil
}

// readRelativeBias reads Gather(Reshape(bias, [−1]), index): the table of
// RelativeBiasMod, (heads, 2·max_distance − 1).
func readRelativeBias(g match.Graph, gather *match.Node) (*RelativeBiasMod, match.Param, error) {
	reshape := g.Producer(gather.Inputs()[0])
	if reshape == nil || reshape.Op() != "Reshape" {
		return nil, match.Param{}, fmt.Errorf("the score bias gathered by %s is not a table per head and distance", gather.Name())
	}
	from := reshape.Inputs()[0]
	t, err := g.Constant(from)
	if err == nil {
		t, err = match.Float32(t)
	}
	if err != nil || len(t.Shape()) != 2 || t.Shape()[1]%2 != 1 {
		return nil, match.Param{}, fmt.Errorf("the score bias %q is not a (heads, 2·max_distance − 1) table", from)
	}
	m := &RelativeBiasMod{MaxDistance: (t.Shape()[1] + 1) / 2}
	return m, match.Param{Name: "bias", Value: t, From: from}, nil
}

// readALiBi checks that slopes · (key − query) has ALiBi's slopes, and
// reports whether they are the alibi field's, (H, 1, 1) as positionMask
// writes them, rather than score_mod alibi's (1, H, 1, 1).
func readALiBi(g match.Graph, mul *match.Node) (bool, error) {
	for _, in := range mul.Inputs() {
		t, err := g.Constant(in)
		if err != nil {
			continue
		}
		slopes, err := match.Floats(t)
		if err != nil {
			continue
		}
		want := alibiSlopes(len(slopes))
		for h, m := range slopes {
			if float32(m) != want[h] {
				return false, fmt.Errorf("the score bias of %s has slope %g for head %d, ALiBi's is %g", mul.Name(), m, h, want[h])
			}
		}
		return len(t.Shape()) == 3, nil
	}
	return false, fmt.Errorf("the score bias of %s has no constant slopes", mul.Name())
}

// lastAxis reports whether a Softmax or Concat works on the last axis of
// its output.
func lastAxis(g match.Graph, n *match.Node) bool {
	shape, err := g.Shape(n.Output())
	if err != nil {
		return false
	}
	def := int64(-1)
	if n.Op() == "Softmax" && g.Opset() < 13 {
		def = 1
	}
	axis := n.Int("axis", def)
	return axis == -1 || axis == int64(len(shape)-1)
}

// dropsLastColumn reports whether n is a Slice that keeps all but the last
// element of the last axis.
func dropsLastColumn(g match.Graph, n *match.Node) bool {
	ins := n.Inputs()
	if n.Op() != "Slice" || len(ins) < 4 {
		return false
	}
	in, err1 := g.Shape(ins[0])
	out, err2 := g.Shape(n.Output())
	if err1 != nil || err2 != nil || len(in) != len(out) {
		return false
	}
	axis, ok := g.Scalar(ins[3])
	if !ok || (int(axis) != -1 && int(axis) != len(in)-1) {
		return false
	}
	last := len(in) - 1
	start, ok := g.Scalar(ins[1])
	return ok && start == 0 && out[last] == in[last]-1 && slices.Equal(in[:last], out[:last])
}

// readSinks reads the sink logits from the column (B, H, Tq, 1) the
// softmax gets besides the scores: one per head, the same for every batch
// and query.
func readSinks(g match.Graph, column string) (*tensor.Dense, string, error) {
	var sinks []float32
	for i := range g.Probes() {
		t, err := g.ValueAt(i, column)
		if err != nil {
			return nil, "", err
		}
		shape := t.Shape()
		if len(shape) != 4 || shape[3] != 1 {
			return nil, "", fmt.Errorf("the column %q has shape %v, not (B, H, Tq, 1)", column, shape)
		}
		vals, err := match.Floats(t)
		if err != nil {
			return nil, "", err
		}
		H, rows := shape[1], shape[2]
		if sinks == nil {
			sinks = make([]float32, H)
			for h := range sinks {
				sinks[h] = float32(vals[h*rows])
			}
		}
		for j, x := range vals {
			if h := j / rows % H; H != len(sinks) || float32(x) != sinks[h] {
				return nil, "", fmt.Errorf("the column %q is not one logit per head", column)
			}
		}
	}
	from := ""
	for _, src := range g.Sources(column) {
		c, err := g.Constant(src)
		if err != nil || c.Shape().TotalSize() != len(sinks) {
			continue
		}
		if vals, err := match.Floats(c); err == nil && slices.EqualFunc(vals, sinks, func(a float64, b float32) bool { return float32(a) == b }) {
			from = src
			break
		}
	}
	return tensor.New(tensor.WithShape(len(sinks)), tensor.WithBacking(sinks)), from, nil
}

// causalWindow reads a static bool condition that hides the keys after
// each query and, with a window, those window or more positions before
// it, at every probe shape, in either causal alignment: query i sits at
// key position i (top-left) or i + Tk − Tq (bottom-right, attention.sdpa's
// default; the two agree when Tq = Tk). It returns the window, 0 when no
// key before a query is hidden (at a fixed size, a window as long as the
// sequence), whether the alignment is top-left only, and whether the
// condition is such a mask.
func causalWindow(g match.Graph, cond string) (window int, topLeft, ok bool) {
	aligned := map[bool]bool{false: true, true: true} // top-left? → still possible
	windows := map[bool]int{}
	for i := range g.Probes() {
		t, err := g.ValueAt(i, cond)
		if err != nil {
			return 0, false, false
		}
		hidden, isBool := t.Data().([]bool)
		shape := t.Shape()
		if !isBool || len(shape) < 2 || shape.TotalSize() != shape[len(shape)-2]*shape[len(shape)-1] {
			return 0, false, false
		}
		rows, cols := shape[len(shape)-2], shape[len(shape)-1]
		for _, tl := range []bool{false, true} {
			offset := cols - rows
			if tl {
				offset = 0
			}
			w, fits := windowAt(hidden, cols, offset)
			if !fits || w > 0 && windows[tl] > 0 && w != windows[tl] {
				aligned[tl] = false
			}
			windows[tl] = max(windows[tl], w)
		}
	}
	switch {
	case aligned[false]:
		window = windows[false]
	case aligned[true]:
		window, topLeft = windows[true], true
	default:
		return 0, false, false
	}
	if window == 0 { // no probe is longer than the window: read its constant
		window = windowConstant(g, cond)
	}
	return window, topLeft, true
}

// windowAt reads one probe's mask (rows of cols keys) with query i at key
// position i + offset: it returns the window (0 for none) and whether the
// mask hides exactly the keys after the query and, with the window, those
// window or more positions before it.
func windowAt(hidden []bool, cols, offset int) (int, bool) {
	w := 0 // the nearest hidden key before its query's position
	for j, h := range hidden {
		if back := j/cols + offset - j%cols; h && back >= 0 && (w == 0 || back < w) {
			w = back
		}
	}
	for j, h := range hidden {
		back := j/cols + offset - j%cols
		if h != (back < 0 || w > 0 && back >= w) {
			return 0, false
		}
	}
	return w, true
}

// windowConstant reads the window of a causal mask Or(future, Greater(query
// − key, window − 1)) as positionMask writes it, 0 when there is none.
func windowConstant(g match.Graph, cond string) int {
	or := g.Producer(cond)
	if or == nil || or.Op() != "Or" {
		return 0
	}
	for _, in := range or.Inputs() {
		if gt := g.Producer(in); gt != nil && gt.Op() == "Greater" {
			if sub := g.Producer(gt.Inputs()[0]); sub != nil && sub.Op() == "Sub" {
				if c, ok := g.Scalar(gt.Inputs()[1]); ok && c >= 0 {
					return int(c) + 1
				}
			}
		}
	}
	return 0
}

// opName names a node and its op for messages, "nothing" for nil.
func opName(n *match.Node) string {
	if n == nil {
		return "nothing"
	}
	return fmt.Sprintf("%s (%s)", n.Name(), n.Op())
}
