package lift

import (
	"fmt"
	"slices"
	"strings"

	"github.com/attnrun/attnrun/onnxio/match"
)

// scores is the chain from the query-key product to the softmax.
type scores struct {
	qk    *node
	nodes []*node
	scale float64
	masks []maskTerm
	// dynamic are masks computed from graph inputs (a key padding mask).
	dynamic []maskTerm
}

// attention analyzes the computation around one Softmax and returns the
// layer it lifts to, or why it cannot be lifted. The recognized shape is
//
//	softmax(scale · (Q Kᵀ) [masked]) V  [heads merged] [out projection]
//
// with Q, K and V projections of token tensors (Linear, packed Linear, or
// none), split into heads by any layout of Reshape, Transpose, Slice and
// Gather nodes. Layouts are checked by tracing index tensors through them
// (see probe), so it does not matter how an exporter spells them.
func (a *analysis) attention(sm *node) (*region, *failure) {
	var problems []string
	sc, f := a.scores(sm)
	if f != nil {
		return nil, f
	}
	all := append([]*node{sm}, sc.nodes...)
	if f := a.softmaxAxis(sm); f != nil {
		f.nodes = uniqueNodes(all)
		return nil, f
	}
	pv, pvNodes, weights, f := a.weightedSum(sm)
	all = append(all, pvNodes...)
	if f != nil {
		f.nodes = uniqueNodes(all)
		return nil, f
	}
	q := a.traceBack(sc.qk.GetInput()[0], true)
	k := a.traceBack(sc.qk.GetInput()[1], true)
	v := a.traceBack(pv.GetInput()[1], true)
	srcQ, srcK, srcV := a.sourceOf(q.base), a.sourceOf(k.base), a.sourceOf(v.base)
	packed := false // identity.go: packed queries, keys and values of flattened rows
	if cq, tokens, ok := a.packedRows(q); ok {
		ck, tk, okK := a.packedRows(k)
		cv, tv, okV := a.packedRows(v)
		if okK && okV && tk == tokens && tv == tokens {
			src := a.packedSource(tokens)
			q, k, v, srcQ, srcK, srcV, packed = cq, ck, cv, src, src, src, true
		}
	}
	for _, c := range []chain{q, k, v} {
		all = append(all, c.nodes...)
	}
	for _, s := range []source{srcQ, srcK, srcV} {
		if s.lin != nil {
			all = append(all, s.lin.nodes...)
			all = append(all, s.pre.nodes...)
		}
	}
	var maskNodes []*node
	for _, d := range sc.dynamic {
		maskNodes = append(maskNodes, a.maskNodes(d.value)...)
	}
	all = append(all, maskNodes...)
	if srcK.tokens != srcV.tokens {
		problems = append(problems, fmt.Sprintf("keys come from %q but values from %q", srcK.tokens, srcV.tokens))
	}
	if v.scale != 1 {
		problems = append(problems, fmt.Sprintf("the values are scaled by %g", v.scale))
	}
	if len(problems) > 0 {
		return nil, fail(all, "attention: %s", strings.Join(problems, "; "))
	}
	l := &attentionLayer{a: a, sm: sm, sc: sc, pv: pv, q: q, k: k, v: v, srcQ: srcQ, srcK: srcK, srcV: srcV, weights: weights}
	r, err := l.build()
	all = append(all, l.extra...)
	if err != nil {
		return nil, fail(all, "attention: %v", err)
	}
	if packed {
		r.notes = append(r.notes, fmt.Sprintf("the attention reads its queries, keys and values as columns of %q, projected by nothing: W_query, W_key and W_value select those columns (no graph tensor)", srcQ.tokens))
	}
	for _, pad := range r.before { // the keep mask as a layer of its own, which other attentions may share
		if f := a.checkContained(pad); f != nil {
			return nil, f
		}
		all = slices.DeleteFunc(all, func(n *node) bool { return slices.Contains(pad.nodes, n) })
	}
	if l.keepMask != "" {
		if a.keepMasks == nil {
			a.keepMasks = map[string]bool{}
		}
		a.keepMasks[l.keepInput] = !l.lengths
		if l.lengths {
			if a.lengthInputs == nil {
				a.lengthInputs = map[string]string{}
			}
			a.lengthInputs[l.keepInput] = l.srcK.tokens
		}
	}
	r.nodes = uniqueNodes(all)
	if f := a.checkContained(r); f != nil {
		return nil, f
	}
	if l.seqFirst { // the attention's (B, T, d), then the graph's (T, B, d)
		swap, err := match.BuildOpLayer("Transpose", match.Transpose{Dim0: 0, Dim1: 1})
		if swap == nil && err == nil {
			return nil, fail(r.nodes, "attention: the output is sequence-first and no layer is registered for Transpose (match.RegisterOpLayer)")
		}
		var fields []field
		if err == nil {
			fields, err = fieldsOf(swap)
		}
		if err != nil {
			return nil, fail(r.nodes, "attention: the output is sequence-first: %v", err)
		}
		t := &region{typ: swap.Type, kind: "transpose", inputs: []string{r.output + "::batch_first"}, output: r.output,
			fields: fields, before: []*region{r}}
		r.output = t.inputs[0]
		return t, nil
	}
	return r, nil
}

// softmaxAxis checks that the softmax normalizes over the last axis.
func (a *analysis) softmaxAxis(sm *node) *failure {
	shape, err := a.probes[0].shape(sm.GetInput()[0])
	if err != nil {
		return fail(nil, "softmax: %v", err)
	}
	def := int64(-1)
	if a.g.Opset < 13 {
		def = 1 // coerced to 2-D: equals the last axis only when it is the last axis
	}
	axis := sm.Int("axis", def)
	if axis < 0 {
		axis += int64(len(shape))
	}
	if axis != int64(len(shape)-1) {
		return fail(nil, "softmax over axis %d of a rank-%d tensor: attention normalizes over the last axis (the keys)", axis, len(shape))
	}
	return nil
}

// scoresView is the graph as match.WalkScores sees it for the lifter: the
// scores are values computed from the graph inputs; a scale is a static
// scalar, the same at every probe; a Where fills with -inf (or a large
// negative number) from a static value; an Add adds a static mask, or one
// computed from graph inputs next to the scores.
type scoresView struct{ analysisView }

// Follows lets the walk through values computed from the graph inputs.
func (v scoresView) Follows(x string, _ *node) bool { return v.a.g.IsData(x) }

// Carries reports whether input k of step n carries the scores.
func (v scoresView) Carries(n *node, k int) bool {
	a, ins := v.a, n.GetInput()
	switch n.GetOpType() {
	case "Mul", "Div":
		_, x, ok := a.scalarFactor(n)
		return ok && x == ins[k]
	case "Where":
		fill := ins[3-k]
		return a.g.Static(fill) && a.g.IsData(ins[k]) && a.isMaskFill(fill)
	case "Add":
		x, other := ins[k], ins[1-k]
		return a.g.IsData(x) && (a.g.Static(other) || a.leadsToProduct(x) && !a.leadsToProduct(other))
	case "Reshape":
		return a.regroups(ins[0], n.GetOutput()[0])
	case "Cast":
		return a.floatCopy(n)
	}
	return true // Identity
}

// liftedScores are the chains the lifter takes: any number of scales,
// masks and copies.
var liftedScores = match.Rules{Copies: true, Reshapes: true}

// scores walks back from the softmax to the query-key product, collecting
// scale factors, static masks and masks computed from inputs; a chain that
// reaches no product is a failure.
func (a *analysis) scores(sm *node) (scores, *failure) {
	g := a.g
	walk := match.WalkScores[*node, string](scoresView{analysisView{a}}, sm.GetInput()[0], liftedScores)
	s := scores{scale: 1, nodes: walk.Nodes}
	failed := append(s.nodes, sm)
	n := walk.At
	switch walk.Stop {
	case match.AtSource:
		return s, fail(failed, "softmax over %q, which is not computed from query-key scores", walk.Value)
	case match.AtProduct:
		if ins := n.GetInput(); !g.IsData(ins[0]) || !g.IsData(ins[1]) {
			return s, fail(failed, "softmax over a product with a constant matrix (node %s), not of queries and keys", n.Label())
		}
		s.qk = n
	case match.NoScores:
		switch n.GetOpType() {
		case "Where":
			return s, fail(failed, "node %s (Where) does not fill masked scores with -inf or %g or less", n.Label(), float64(masked))
		case "Add":
			return s, fail(failed, "node %s adds two computed values to the scores", n.Label())
		}
		fallthrough
	default:
		return s, fail(failed, "softmax over the output of node %s (%s), not over query-key scores", n.Label(), n.GetOpType())
	}
	scaled := false // a scale step lies between the softmax and this step
	for _, st := range walk.Steps {
		ins := st.Node.GetInput()
		switch st.Kind {
		case match.Scale:
			f, _, _ := a.scalarFactor(st.Node)
			s.scale *= f
			scaled = true
		case match.Where:
			kind := maskWhereTrue
			if st.Keep {
				kind = maskWhereFalse
			}
			m := maskTerm{value: ins[st.Arg], kind: kind, at: reshapedAt(walk.Steps, st, ins[st.Scores])}
			if g.Static(m.value) {
				s.masks = append(s.masks, m)
			} else {
				s.dynamic = append(s.dynamic, m)
			}
		case match.Add:
			m := maskTerm{value: ins[st.Arg], kind: maskAdd, at: reshapedAt(walk.Steps, st, ins[st.Scores]), unscaled: !scaled}
			if g.Static(m.value) {
				s.masks = append(s.masks, m)
			} else {
				s.dynamic = append(s.dynamic, m)
			}
		}
	}
	return s, nil
}

// regroups reports whether a Reshape of the scores from value in to out
// keeps their last two axes and their order at every probe: (B·H, T, S)
// to (B, H, T, S) or back.
func (a *analysis) regroups(in, out string) bool {
	for _, p := range a.probes {
		si, err1 := p.shape(in)
		so, err2 := p.shape(out)
		if err1 != nil || err2 != nil || len(si) < 3 || len(so) < 3 || product(si) != product(so) ||
			si[len(si)-1] != so[len(so)-1] || si[len(si)-2] != so[len(so)-2] {
			return false
		}
	}
	return true
}

// reshapedAt is the scores value a mask step applies to when a Reshape
// lies between it and the product (steps are listed from the softmax's
// side), "" when none does.
func reshapedAt(steps []match.Step[*node], st match.Step[*node], scores string) string {
	i := slices.IndexFunc(steps, func(s match.Step[*node]) bool { return s.Node == st.Node })
	for _, later := range steps[i+1:] {
		if later.Node.GetOpType() == "Reshape" {
			return scores
		}
	}
	return ""
}

// leadsToProduct reports whether v is a product of two computed values,
// possibly scaled: the query-key scores rather than a mask.
func (a *analysis) leadsToProduct(v string) bool {
	for {
		n := a.g.Producer(v)
		if n == nil {
			return false
		}
		if f, x, ok := a.scalarFactor(n); ok && f != 0 {
			v = x
			continue
		}
		if n.GetOpType() == "Identity" || a.floatCopy(n) || n.GetOpType() == "Reshape" && a.regroups(n.GetInput()[0], v) {
			v = n.GetInput()[0]
			continue
		}
		if x, ok := a.staticStep(n); ok { // a causal Where or a static mask before the added one (GPT-2)
			v = x
			continue
		}
		return n.GetOpType() == "MatMul" && a.g.IsData(n.GetInput()[0]) && a.g.IsData(n.GetInput()[1])
	}
}

// staticStep reports whether n masks a value with static operands alone,
// Where(m, x, fill) or Where(m, fill, x) with a mask fill, or Add(x, m),
// and returns x.
func (a *analysis) staticStep(n *node) (string, bool) {
	ins := n.GetInput()
	switch {
	case n.GetOpType() == "Where" && len(ins) == 3 && a.g.Static(ins[0]):
		for k := 1; k <= 2; k++ {
			if a.g.IsData(ins[k]) && a.g.Static(ins[3-k]) && a.isMaskFill(ins[3-k]) {
				return ins[k], true
			}
		}
	case n.GetOpType() == "Add" && len(ins) == 2:
		for k := range 2 {
			if a.g.IsData(ins[k]) && a.g.Static(ins[1-k]) {
				return ins[k], true
			}
		}
	}
	return "", false
}

// weightedSum finds the product of the softmax output with the values, and
// the graph outputs that return the attention weights themselves.
func (a *analysis) weightedSum(sm *node) (*node, []*node, []weightsOutput, *failure) {
	var pvs, nodes []*node
	var weights []weightsOutput
	var visit func(v string) *failure
	visit = func(v string) *failure {
		if a.g.IsOutput(v) {
			weights = append(weights, weightsOutput{output: v})
		}
		if isNaN, where, ok := a.nanZeroing(v); ok { // attention_nan.go
			nodes = append(nodes, isNaN, where)
			return visit(where.GetOutput()[0])
		}
		for _, r := range a.readers(v) {
			switch {
			case r.GetOpType() == "MatMul" && r.GetInput()[0] == v && r.GetInput()[1] != v:
				pvs = append(pvs, r)
			case (r.GetOpType() == "Identity" || r.GetOpType() == "Dropout") && a.isLayout(r) || a.floatCopy(r):
				nodes = append(nodes, r)
				if f := visit(r.GetOutput()[0]); f != nil {
					return f
				}
			default:
				w, chain, f := a.weightsChain(r, v)
				if f != nil {
					return f
				}
				nodes = append(nodes, chain...)
				weights = append(weights, w)
			}
		}
		return nil
	}
	if f := visit(sm.GetOutput()[0]); f != nil {
		return nil, nodes, nil, f
	}
	if len(pvs) != 1 {
		return nil, append(nodes, pvs...), nil, fail(nil, "the attention weights of softmax %s are multiplied with %d value tensors, want 1", sm.Label(), len(pvs))
	}
	return pvs[0], append(nodes, pvs[0]), weights, nil
}

// weightsChain follows the attention weights from node n to a graph
// output: layout nodes, at most one ReduceSum or ReduceMean (averaging over
// heads, as nn.MultiheadAttention does) and scalar factors.
func (a *analysis) weightsChain(n *node, v string) (weightsOutput, []*node, *failure) {
	var nodes []*node
	reduced := false
	for {
		nodes = append(nodes, n)
		switch {
		case a.isLayout(n) && n.GetInput()[0] == v:
		case (n.GetOpType() == "ReduceSum" || n.GetOpType() == "ReduceMean") && !reduced:
			reduced = true
		default:
			if _, x, ok := a.scalarFactor(n); !ok || x != v {
				return weightsOutput{}, nodes, fail(nil, "the attention weights are also read by node %s (%s), which is not part of an attention layer",
					n.Label(), n.GetOpType())
			}
		}
		v = n.GetOutput()[0]
		rs := a.readers(v)
		if a.g.IsOutput(v) && len(rs) == 0 {
			return weightsOutput{output: v, mean: reduced}, nodes, nil
		}
		if len(rs) != 1 {
			return weightsOutput{}, nodes, fail(nil, "the attention weights reach value %q, read by %d nodes", v, len(rs))
		}
		n = rs[0]
	}
}

// attentionLayer decides which attnrun layer an attention computation is
// and collects its parameters.
type attentionLayer struct {
	a                *analysis
	sm, pv           *node
	sc               scores
	q, k, v          chain
	srcQ, srcK, srcV source
	weights          []weightsOutput
	extra            []*node // merge, out projection and its layout, once found
	// keepMask is the value that adds a keep mask (Hugging Face's
	// attention_mask, read from keepInput) to the scores; the attention
	// reads it as the output of a mask.padding layer.
	keepMask, keepInput string
	// noOutProj records that the merged heads are the output, projected
	// by nothing: the layer's output projection is the identity.
	noOutProj bool
	// seqFirst records that the output holds the tokens (T, B, d) where
	// the input holds them (B, T, d): fairseq's layout.
	seqFirst bool
	// fill, when not 0, is what the mask from keepInput adds to padding
	// keys (mask.additive).
	fill float64
	// lengths records that keepInput holds sequence lengths (mask.lengths)
	// rather than an attention_mask (mask.padding); context that it is a
	// mask over the positions of the whole context (contextmask.go).
	lengths, context bool
	// shift is the number a static mask adds to every score alike (see
	// uniformShift), 0 for none.
	shift float64
}

func (l *attentionLayer) build() (*region, error) {
	a := l.a
	var hs heads
	var tokQ, tokK tokens
	var merge, post chain
	var out *linear
	var causal bool
	var kpm paddingMask
	for i, p := range a.probes {
		var err error
		if tokQ, err = a.tokensOf(p, l.srcQ.tokens); err != nil {
			return nil, err
		}
		if tokK, err = a.tokensOf(p, l.srcK.tokens); err != nil {
			return nil, err
		}
		if tokQ.B != tokK.B {
			return nil, fmt.Errorf("queries have %d sequences, keys %d", tokQ.B, tokK.B)
		}
		scoreShape, err := p.shape(l.sc.qk.GetOutput()[0])
		if err != nil {
			return nil, err
		}
		m, err := a.maskAt(p, l.sc.masks, scoreShape)
		if shift, ok := a.uniformShift(p, l.sc.masks, scoreShape); ok { // mask.go
			if i > 0 && shift != l.shift {
				return nil, fmt.Errorf("the scores are shifted by %g at one sequence length and by %g at another", l.shift, shift)
			}
			l.shift, m, err = shift, make([]bool, len(m)), nil
		}
		if err != nil {
			return nil, err
		}
		c, err := causality(m, scoreShape)
		if err != nil {
			return nil, err
		}
		if i > 0 && c != causal {
			return nil, fmt.Errorf("the mask is causal at one sequence length and not at another")
		}
		causal = c
		h, err := l.headsAt(p, tokQ, tokK)
		if err != nil {
			return nil, err
		}
		if i > 0 && (h.H != hs.H || h.KVH != hs.KVH || h.dk != hs.dk || h.segQ != hs.segQ || h.segK != hs.segK || h.segV != hs.segV) {
			return nil, fmt.Errorf("the head split differs between sequence lengths")
		}
		hs = h
		if i == 0 {
			merge = a.traceForward(l.pv.GetOutput()[0])
			l.extra = append(l.extra, merge.nodes...)
		}
		mShape, mIdx, err := p.trace(l.pv.GetOutput()[0], merge.value, nil, nil)
		if err != nil {
			return nil, err
		}
		pvShape, err := p.shape(l.pv.GetOutput()[0])
		if err != nil {
			return nil, err
		}
		rowsTok, err := mergedRows(mIdx, mShape, pvShape, hs, tokQ.T)
		if err != nil {
			return nil, err
		}
		batched := len(mustShape(p, l.srcQ.tokens)) == 3
		split := hs.H > 1 || l.shared() || l.cross() || !canonical(rowsTok, mShape, tokQ, batched)
		if i == 0 && split {
			if out = a.linearReading(merge.value); out == nil {
				if hs.H == 1 || !canonical(rowsTok, mShape, tokQ, batched) {
					return nil, fmt.Errorf("%d heads are merged but no output projection follows (attention.multihead needs out_proj)", hs.H)
				}
				out = identityOut(merge.value, mShape[len(mShape)-1]) // ONNX Runtime's Attention: heads merged, not projected
				l.noOutProj = true
			} else {
				post = a.traceForward(out.out)
				l.extra = append(l.extra, out.nodes...)
				l.extra = append(l.extra, post.nodes...)
			}
		}
		if out != nil && !l.noOutProj {
			yShape, yIdx, err := p.trace(out.out, post.value, nil, nil)
			if err != nil {
				return nil, err
			}
			if rowsTok, err = projectedRows(yIdx, yShape, rowsTok, out.dOut); err != nil {
				return nil, err
			}
			mShape = yShape
		}
		seqFirst := !canonical(rowsTok, mShape, tokQ, batched) && sequenceFirst(rowsTok, mShape, tokQ, batched)
		if i > 0 && seqFirst != l.seqFirst {
			return nil, fmt.Errorf("the output is laid out sequence-first at one sequence length and not at another")
		}
		l.seqFirst = seqFirst
		if !seqFirst && !canonical(rowsTok, mShape, tokQ, batched) {
			return nil, fmt.Errorf("the output %s is not laid out like the input tokens", fmtShape(mShape))
		}
		if len(l.sc.dynamic) > 0 {
			if kpm, err = l.paddingMaskAt(p, hs, scoreShape, tokK); err != nil {
				return nil, err
			}
		}
	}
	if a.cache != nil && !l.cross() && tokQ.T == 1 {
		// A decoder that takes one token a step (GPT-2's input_ids
		// declared (batch, 1)): at one query a causal mask hides no key,
		// so causal or not are the same numbers, and a cache steps only
		// causal attention.
		causal = true
	}
	maskValue := kpm.input
	if kpm.kind == "keep" || kpm.kind == "lengths" || kpm.kind == "additive" {
		l.keepMask, l.keepInput = a.keepMaskValue(l.sc.dynamic[0].value), kpm.input // sdpa_decomposition.go
		maskValue = l.keepMask
		causal = causal || kpm.causal // a 4-D causal mask built from the attention_mask
		l.lengths, l.context = kpm.kind == "lengths", kpm.context
		if kpm.kind == "lengths" {
			kpm.kind = "keep" // what mask.lengths gives the attention, as mask.padding
		}
		if kpm.kind == "additive" {
			l.fill = kpm.fill
		}
	}
	output := merge.value
	if out != nil && !l.noOutProj {
		output = post.value
	}
	r := &region{inputs: []string{l.srcQ.tokens}, output: output, weights: l.weights, kind: "attention"}
	if l.noOutProj {
		r.notes = append(r.notes, fmt.Sprintf("the attention computing %q merges its heads without an output projection: out_proj is the identity (no graph tensor)", output))
	}
	ctx := 0
	if causal {
		ctx = a.maskBuffer(l.sc.masks)
	}
	scale := l.sc.scale * l.q.scale * l.k.scale
	projected := l.srcQ.lin != nil && l.srcK.lin != nil && l.srcV.lin != nil
	if !projected && (l.srcQ.lin != nil || l.srcK.lin != nil || l.srcV.lin != nil || l.cross() || kpm.input != "") {
		return nil, fmt.Errorf("some of queries, keys and values are projected and some are not")
	}
	average := true
	for _, w := range r.weights {
		average = average && w.mean
	}
	att := &match.Attention{Queries: l.srcQ.tokens, Keys: l.srcK.tokens, Cross: l.cross(), KeyWidth: tokK.D,
		BatchFirst: len(mustShape(a.probes[0], l.srcQ.tokens)) == 3, PaddingMask: maskValue, PaddingMaskKind: kpm.kind, KeepInput: l.keepInput, KeepFill: l.fill, KeepLengths: l.lengthsOf(), KeepNodes: l.keepNodes(), KeepContext: l.context,
		AverageWeights: average, Width: tokQ.D, Tokens: tokQ.T, Probes: len(a.probes), Heads: hs.H, HeadDim: hs.dk, KVHeads: hs.KVH,
		Scale: scale, Causal: causal, Context: ctx, Projected: projected, ScoreShift: l.shift,
		SameSource: l.q.base == l.k.base && l.k.base == l.v.base,
		Segments:   [3]int{hs.segQ, hs.segK, hs.segV},
		Registered: registered,
		QKV: func(prefix string, width int, matrix bool) ([]match.Param, bool, error) {
			ps, bias, err := l.qkvParams(prefix, hs, width, matrix)
			return publicParams(ps), bias, err
		}}
	if projected {
		att.Matrix = l.srcQ.lin.matrix && l.srcK.lin.matrix && l.srcV.lin.matrix
		att.Biased = l.srcQ.lin.bias != nil
		att.Projections = [3]*match.Linear{l.srcQ.lin.public(), l.srcK.lin.public(), l.srcV.lin.public()}
	}
	if out != nil {
		att.Out = out.public()
	}
	return r, a.buildAttention(r, att)
}

// buildAttention offers a recognized self-attention to the layers'
// attention builders (match.RegisterAttention) and fills r with the layer
// the first one returns.
func (a *analysis) buildAttention(r *region, att *match.Attention) error {
	for _, b := range match.AttentionBuilders() {
		l, err := runBuilder(b, att)
		if err != nil {
			return err
		}
		if l == nil {
			continue
		}
		if att.ScoreShift != 0 && !slices.ContainsFunc(l.Config, func(f match.Field) bool { return f.Key == "score_mod" }) {
			return fmt.Errorf("the scores are shifted by %g, which layer type %s (builder %s) does not add", att.ScoreShift, l.Type, b.Name)
		}
		r.typ, r.notes = l.Type, append(r.notes, l.Notes...)
		if len(l.Inputs) > 0 {
			r.inputs = slices.Clone(l.Inputs)
		}
		if r.fields, err = fieldsOf(l); err != nil {
			return err
		}
		if r.params, err = a.paramsOf(l); err != nil {
			return err
		}
		r.before, err = a.beforeRegions(l)
		return err
	}
	return fmt.Errorf("no registered layer type lifts attention with %d heads of %d", att.Heads, att.HeadDim)
}

// runBuilder runs an attention builder, recovering from a panic in it.
func runBuilder(b match.AttentionBuilder, att *match.Attention) (l *match.Layer, err error) {
	defer func() {
		if v := recover(); v != nil {
			l, err = nil, fmt.Errorf("attention builder %s: panic: %v", b.Name, v)
		}
	}()
	return b.Build(att)
}

// publicParams converts parameters into pattern parameters, their pieces
// as they are.
func publicParams(ps []param) []match.Param {
	out := make([]match.Param, len(ps))
	for i, p := range ps {
		out[i] = match.Param{Name: p.name, Value: p.value}
		for _, pc := range p.pieces {
			out[i].Pieces = append(out[i].Pieces, match.Piece{From: pc.value, Transposed: pc.transposed, Lo: pc.lo, Hi: pc.hi, Split: pc.split})
		}
	}
	return out
}

// cross reports cross-attention: keys and values from other tokens than
// the queries.
func (l *attentionLayer) cross() bool { return l.srcQ.tokens != l.srcK.tokens }

// mustShape returns a value's shape at a probe, or nil.
func mustShape(p *probe, v string) []int {
	s, _ := p.shape(v)
	return s
}

// shared reports whether two of the projections are one Linear (a packed
// in_proj), which only attention.multihead's split can express.
func (l *attentionLayer) shared() bool {
	q, k, v := l.srcQ.lin, l.srcK.lin, l.srcV.lin
	same := func(a, b *linear) bool { return a != nil && b != nil && a.out == b.out }
	return q != nil && (same(q, k) || same(q, v) || same(k, v))
}

// headsAt checks the head split of queries, keys and values at one probe.
func (l *attentionLayer) headsAt(p *probe, tokQ, tokK tokens) (heads, error) {
	a := l.a
	elQ, shQ, err := a.elements(p, l.q, l.srcQ)
	if err != nil {
		return heads{}, err
	}
	elK, shK, err := a.elements(p, l.k, l.srcK)
	if err != nil {
		return heads{}, err
	}
	elV, shV, err := a.elements(p, l.v, l.srcV)
	if err != nil {
		return heads{}, err
	}
	gq, dk, err := groups(elQ, shQ, false, tokQ.T, "queries")
	if err != nil {
		return heads{}, err
	}
	gk, dk2, err := groups(elK, shK, true, tokK.T, "keys")
	if err != nil {
		return heads{}, err
	}
	gv, dv, err := groups(elV, shV, false, tokK.T, "values")
	if err != nil {
		return heads{}, err
	}
	if dk != dk2 {
		return heads{}, fmt.Errorf("queries have %d features per head, keys %d", dk, dk2)
	}
	return assignHeads(gq, gk, gv, dk, dv, tokQ.B)
}

// projectedRows checks the layout after the output projection: every row
// of y is one row of the projection's output, features in order, and
// returns the token of each row of y.
func projectedRows(idx, shape, rowsTok []int, width int) ([]int, error) {
	if len(shape) == 0 || shape[len(shape)-1] != width {
		return nil, fmt.Errorf("the projected output has shape %s, want %d features", fmtShape(shape), width)
	}
	out := make([]int, len(idx)/width)
	for i, f := range idx {
		if f%width != i%width {
			return nil, fmt.Errorf("the projected output reorders features")
		}
		out[i/width] = rowsTok[f/width]
	}
	return out, nil
}

// linearReading finds a Linear whose input is v and v's only reader.
func (a *analysis) linearReading(v string) *linear {
	rs := a.readers(v)
	if len(rs) != 1 || a.g.IsOutput(v) || rs[0].GetInput()[0] != v {
		return nil
	}
	n := rs[0]
	switch n.GetOpType() {
	case "Gemm":
		return a.matchGemm(n)
	case "MatMul":
		out := n.GetOutput()[0]
		next := a.readers(out)
		if len(next) == 1 && next[0].GetOpType() == "Reshape" && !a.g.IsOutput(out) { // Tensordot: rows reshaped before the bias
			out = next[0].GetOutput()[0]
			next = a.readers(out)
		}
		if len(next) == 1 && next[0].GetOpType() == "Add" && !a.g.IsOutput(out) {
			if l := a.matchLinear(next[0].GetOutput()[0]); l != nil && (l.in == v || slices.Contains(l.nodes, n)) {
				return l
			}
		}
		return a.matchMatMul(n)
	}
	return nil
}

// qkvParams collects W_query, W_key, W_value (weight, then bias) from the
// projections, each restricted to its columns [seg, seg+width).
func (l *attentionLayer) qkvParams(prefix string, hs heads, width int, matrix bool) ([]param, bool, error) {
	srcs := []source{l.srcQ, l.srcK, l.srcV}
	segs := []int{hs.segQ, hs.segK, hs.segV}
	withBias := l.srcQ.lin.bias != nil
	var ps []param
	for i, name := range []string{"W_query", "W_key", "W_value"} {
		lin, lo := srcs[i].lin, segs[i]
		hi := lo + width
		if hi > lin.dOut {
			return nil, false, fmt.Errorf("%s uses columns %d:%d of a %d-column projection", name, lo, hi, lin.dOut)
		}
		if (lin.bias != nil) != withBias {
			return nil, false, fmt.Errorf("some of the query, key and value projections have a bias and some do not")
		}
		whole := lo == 0 && hi == lin.dOut
		if matrix {
			ps = append(ps, param{name: prefix + name, value: transpose2(lin.weight), pieces: []piece{{value: lin.weightValue}}})
			continue
		}
		ps = append(ps, param{name: prefix + name + ".weight", value: match.Rows(lin.weight, lo, hi),
			pieces: []piece{lin.weightPiece(lo, hi, whole)}})
		if withBias {
			ps = append(ps, param{name: prefix + name + ".bias", value: match.Rows(lin.bias, lo, hi),
				pieces: []piece{lin.biasPiece(lo, hi, whole)}})
		}
	}
	return ps, withBias, nil
}

// lengthsOf is the key tokens whose length a keep input of lengths
// (ONNX Runtime's 1-D mask_index) is measured against, "" for a keep
// input of 0s and 1s.
func (l *attentionLayer) lengthsOf() string {
	if !l.lengths {
		return ""
	}
	return l.srcK.tokens
}

// keepNodes are the nodes that compute a lengths mask or a context mask,
// which read the tokens for their number alone, nil for another keep
// input.
func (l *attentionLayer) keepNodes() []*match.Node {
	if !l.lengths && !l.context {
		return nil
	}
	var out []*match.Node
	for _, n := range uniqueNodes(l.a.maskNodes(l.keepMask)) {
		out = append(out, match.NewNode(n))
	}
	return out
}

// floatCopy reports whether n casts float32 data to float32, which
// changes nothing (Megatron's .float() of the scores and the weights).
func (a *analysis) floatCopy(n *node) bool {
	return match.IsFloatCopy(patternGraph{a: a}, match.NewNode(n))
}
