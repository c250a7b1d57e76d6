package exec

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/attnrun/attnrun/internal/attn"
	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/onnxio/match"
)

// Attention fusion. PyTorch exports scaled dot-product attention as a
// chain of nodes,
//
//	S = MatMul(Q, Kᵀ) → Where(mask, −inf, S) or Add(S, mask) → Div(S, c) or Mul(S, c)
//	  → Softmax(S, axis −1) → MatMul(S, V) [→ Transpose(0, 2, 1, 3)]
//
// (masking and scaling in either order, each optional), which, run node
// by node, materializes the B·H·T·T scores three times. The attention
// fusion replaces such a chain with one node that calls kernels.AttendBatch,
// which never forms the scores and skips the hidden half of a causal
// mask. Q, K and V are read in place through the Transposes that put the
// heads first, and the result is written straight into the layout of a
// trailing Transpose.
//
// What can be checked on the graph is checked in New: every intermediate
// is read by the next node of the chain only and is no graph output. What
// depends on values — the scale is a positive scalar, the mask is exactly
// causal (or hides nothing) for this run's sizes, the shapes line up
// without broadcasting — is checked by the fused node on every run; when a
// check fails it runs the original nodes instead, so the result is always
// the unfused graph's, up to float32 rounding.
//
// That includes NaN and ±Inf. The kernel's causal frontier replaces the
// hidden scores, as Where does; Add adds −Inf, which leaves a NaN or +Inf
// score NaN, so an Add mask is fused only while every score is finite
// (kernels.FiniteScores). A query with nothing to see is NaN, as Softmax
// gives, and the weights multiply every row of V, as MatMul does.

func init() {
	registerFusion(fusion{name: "attention", order: 10, run: fuseAttention})
	registerFusion(fusion{name: "shape of transpose", order: 30, run: skipTransposeForShape})
}

// fuseAttention rewrites every attention chain of order into a fused node
// (see the comment at the top of this file).
func fuseAttention(f *fuser, order []*node) []*node {
	replaced := map[*node]*node{} // a chain's last node: the fused node
	for _, n := range order {
		if n.op != "MatMul" || f.removed[n] {
			continue
		}
		if fused, fa, last := f.match(n); fused != nil {
			replaced[last] = fused
			f.g.attention = append(f.g.attention, fa)
		}
	}
	return f.replace(order, replaced)
}

// fusedAttentionOp is the op name of fused nodes, as errors show it.
const fusedAttentionOp = "FusedAttention"

// stepKind tells apart the elementwise nodes between the two products.
type stepKind int

const (
	stepScale stepKind = iota // Div(S, c) or Mul(S, c): c a positive scalar
	stepWhere                 // Where(mask, −inf, S) or Where(mask, S, −inf)
	stepAdd                   // Add(S, mask): mask 0 or −inf
)

// chainStep is one elementwise node of a chain, its side operands given as
// indexes into the fused node's inputs.
type chainStep struct {
	kind  stepKind
	arg   int  // c, the bool mask or the additive mask
	fill  int  // Where: the fill value, which must be −inf
	keep  bool // Where: true marks visible keys (Where(m, S, fill)), not hidden ones
	onDiv bool // scale: S is divided by c rather than multiplied
}

// operand is where the fused node reads Q, Kᵀ or V: one of its inputs,
// seen through the perm of a Transpose the fused node skips (nil if none).
type operand struct {
	arg  int
	perm []int64
}

// fusedAttention is the plan of one fused node.
type fusedAttention struct {
	q, kt, v operand
	steps    []chainStep
	softmax  *node   // for its axis and opset
	outPerm  []int64 // the trailing Transpose's perm, nil if none
	// fallback is the original chain in order, with the Transposes the
	// operands skip first; it runs on the fused node's inputs when a
	// run-time check fails.
	fallback []*node
	out      int // slot of the chain's result

	fast, slow atomic.Int64 // runs on the fused path and on the fallback
}

// private reports whether slot s is read by exactly one node input and is
// no graph output, so that a chain may swallow it.
func (f *fuser) private(s int) bool { return f.uses.Private(s) }

// scoresView is the graph as match.WalkScores sees it for a fusion: a
// chain swallows only values that its next node alone reads, each the
// single output of its producer, and its scores come from a MatMul or
// another step.
type scoresView struct{ fuserView }

// Follows lets the walk swallow s when it is private and p writes only s.
func (v scoresView) Follows(s int, p *node) bool { return v.f.private(s) && len(p.out) == 1 }

// Carries reports whether input k of p is private and written by a MatMul
// or another step.
func (v scoresView) Carries(p *node, k int) bool {
	s := p.in[k]
	q := v.f.producer(s)
	return q != nil && v.f.private(s) && (q.op == "MatMul" || match.IsStep(q.op, false))
}

// fusedScores bounds the chains fusion takes: a scale and a mask at most,
// no copies.
var fusedScores = match.Rules{MaxSteps: 2}

// match tries to read mm2 as the last product of an attention chain. It
// returns the fused node, its plan and the chain's last node, or nils.
func (f *fuser) match(mm2 *node) (*node, *fusedAttention, *node) {
	if len(mm2.in) != 2 || len(mm2.out) != 1 || !f.private(mm2.in[0]) {
		return nil, nil, nil
	}
	sm := f.producer(mm2.in[0])
	if sm == nil || sm.op != "Softmax" || len(sm.out) != 1 || !f.private(sm.in[0]) {
		return nil, nil, nil
	}
	// Walk back from the softmax to the first product.
	walk := match.WalkScores[*node, int](scoresView{fuserView{f}}, sm.in[0], fusedScores)
	mm1 := walk.Product
	if walk.Stop != match.AtProduct || len(mm1.in) != 2 {
		return nil, nil, nil
	}
	steps := walk.Steps // last first
	slices.Reverse(steps)
	chain := []*node{mm1}
	for _, st := range steps {
		chain = append(chain, st.Node)
	}
	chain = append(chain, sm, mm2)
	if t := f.outTranspose(mm2); t != nil {
		chain = append(chain, t)
	}
	for _, n := range chain {
		if f.removed[n] { // part of an earlier chain
			return nil, nil, nil
		}
	}

	var c chainInputs
	fa := &fusedAttention{softmax: sm, out: chain[len(chain)-1].out[0]}
	var pre []*node
	for _, x := range []struct {
		op *operand
		n  *node
		k  int
	}{{&fa.q, mm1, 0}, {&fa.kt, mm1, 1}, {&fa.v, mm2, 1}} {
		s := x.n.in[x.k]
		t := f.producer(s)
		if t != nil && t.op == "Transpose" && t.has("perm") && !f.removed[t] {
			x.op.perm, _ = t.attrInts("perm")
			x.op.arg = c.arg(t.in[0], t.inName[0])
			pre = append(pre, t)
			continue
		}
		x.op.arg = c.arg(s, x.n.inName[x.k])
	}
	scales, masks := 0, 0
	for _, p := range steps {
		st, ok := c.step(p)
		if !ok {
			return nil, nil, nil
		}
		if st.kind == stepScale {
			scales++
		} else {
			masks++
		}
		fa.steps = append(fa.steps, st)
	}
	if scales > 1 || masks > 1 {
		return nil, nil, nil
	}
	last := chain[len(chain)-1]
	if last.op == "Transpose" {
		fa.outPerm, _ = last.attrInts("perm")
	}
	fa.fallback = slices.Concat(pre, chain)
	for _, n := range chain {
		f.removed[n] = true
	}
	fused := &node{
		index: last.index, name: last.name, op: fusedAttentionOp, opset: last.opset,
		spec: &opSpec{minIn: len(c.slots), maxIn: len(c.slots), minOut: 1, maxOut: 1, run: fa.run},
		in:   c.slots, out: []int{fa.out}, inName: c.names,
	}
	return fused, fa, last
}

// outTranspose returns the Transpose that alone reads mm2's result, if it
// keeps the last axis last (so the heads' rows stay contiguous).
func (f *fuser) outTranspose(mm2 *node) *node {
	s := mm2.out[0]
	if !f.private(s) {
		return nil
	}
	t := f.reader(s)
	if t == nil || t.op != "Transpose" || len(t.out) != 1 || t.out[0] < 0 {
		return nil
	}
	perm, ok := t.attrInts("perm")
	if !ok || len(perm) < 2 || perm[len(perm)-1] != int64(len(perm)-1) {
		return nil
	}
	return t
}

// chainInputs collects a fused node's inputs while a chain is matched.
type chainInputs struct {
	slots []int
	names []string
}

// arg returns the input index of slot s (named name), adding it if new.
func (c *chainInputs) arg(s int, name string) int {
	if i := slices.Index(c.slots, s); i >= 0 {
		return i
	}
	c.slots = append(c.slots, s)
	c.names = append(c.names, name)
	return len(c.slots) - 1
}

// step describes a step of the chain in terms of the fused node's inputs,
// or reports false when an operand is omitted or the node has the wrong
// number of inputs.
func (c *chainInputs) step(st match.Step[*node]) (chainStep, bool) {
	p := st.Node
	want := 2
	if st.Kind == match.Where {
		want = 3
	}
	if len(p.in) != want || slices.Contains(p.in, -1) {
		return chainStep{}, false
	}
	arg := c.arg(p.in[st.Arg], p.inName[st.Arg])
	switch st.Kind {
	case match.Scale:
		return chainStep{kind: stepScale, arg: arg, onDiv: st.OnDiv}, true
	case match.Add:
		return chainStep{kind: stepAdd, arg: arg}, true
	case match.Where:
		return chainStep{kind: stepWhere, arg: arg, fill: c.arg(p.in[st.Fill], p.inName[st.Fill]), keep: st.Keep}, true
	}
	return chainStep{}, false
}

// run is the fused node's op: the fused kernel when every run-time check
// passes, the original nodes otherwise.
func (fa *fusedAttention) run(rc *runCtx, n *node, in []*value) ([]*value, error) {
	out, ok, err := fa.attend(rc, n, in)
	switch {
	case err != nil:
		return nil, err
	case ok:
		fa.fast.Add(1)
		return rc.one(out)
	}
	fa.slow.Add(1)
	return runOriginal(rc, fa.fallback, n.in, in, fa.out)
}

// runOriginal runs the nodes a fused node replaced, in order, on the fused
// node's inputs (in, read from slots), and returns the value of slot out.
// Like the graph's run, it checks the run's context between nodes and
// lets each intermediate go once its last reader has run.
func runOriginal(rc *runCtx, nodes []*node, slots []int, in []*value, out int) ([]*value, error) {
	env := make(map[int]*value, len(slots)+len(nodes))
	for k, s := range slots {
		env[s] = in[k]
	}
	reads := map[int]int{} // slot made by nodes: readers still to run
	for _, c := range nodes {
		for _, s := range c.in {
			reads[s]++
		}
	}
	defer func() { // whatever is left: the result (held again by the caller) and unread outputs
		for s, v := range env {
			if !slices.Contains(slots, s) {
				rc.drop(v)
			}
		}
	}()
	for _, c := range nodes {
		if err := rc.err(); err != nil {
			return nil, err
		}
		args := make([]*value, len(c.in))
		for k, s := range c.in {
			if s >= 0 {
				args[k] = env[s]
			}
		}
		outs, err := c.spec.run(rc, c, args)
		if err != nil {
			return nil, fmt.Errorf("node %s (%s): %w", c.label(), c.op, err)
		}
		for k, s := range c.out {
			if s >= 0 && k < len(outs) {
				env[s] = outs[k]
				rc.hold(outs[k])
			}
		}
		for _, s := range c.in {
			if reads[s]--; reads[s] == 0 && s != out && !slices.Contains(slots, s) {
				rc.drop(env[s])
				delete(env, s)
			}
		}
		rc.settle()
	}
	return one(env[out])
}

// strided is a float32 array seen through strides: an operand of the
// attention, its last two axes the rows and columns of every head. Its
// shape and strides are arrays, not slices, so that a run's views cost
// no allocation.
type strided struct {
	data           []float32
	rank           int
	shape, strides [maxViewRank]int
}

// maxViewRank is the highest rank the fused attention takes; graphs of
// higher rank run their nodes one by one.
const maxViewRank = 8

// denseView returns the row-major view of data with the given shape.
func denseView(data []float32, shape []int) strided {
	v := strided{data: data, rank: len(shape)}
	copy(v.shape[:], shape)
	step := 1
	for i := v.rank - 1; i >= 0; i-- {
		v.strides[i] = step
		step *= shape[i]
	}
	return v
}

// viewOf returns x seen through perm (nil: as it is); ok is false unless x
// is float32 of rank 2 to maxViewRank and the perm fits.
func viewOf(x *value, perm []int64) (strided, bool) {
	data, ok := x.data.([]float32)
	r := x.rank()
	if !ok || r < 2 || r > maxViewRank {
		return strided{}, false
	}
	st := denseView(data, x.shape)
	if perm == nil {
		return st, true
	}
	if len(perm) != r {
		return strided{}, false
	}
	v := strided{data: data, rank: r}
	var seen [maxViewRank]bool
	for i, p := range perm {
		if p < 0 || p >= int64(r) || seen[p] {
			return strided{}, false
		}
		seen[p] = true
		v.shape[i], v.strides[i] = st.shape[p], st.strides[p]
	}
	return v, true
}

// swapLast returns the view with its last two axes exchanged.
func (v strided) swapLast() strided {
	r := v.rank
	v.shape[r-2], v.shape[r-1] = v.shape[r-1], v.shape[r-2]
	v.strides[r-2], v.strides[r-1] = v.strides[r-1], v.strides[r-2]
	return v
}

// rows returns the view with dense rows, as kernels.Head needs: itself, or
// a contiguous copy, allocated for node n, when its columns are not
// adjacent in memory.
func (v strided) rows(rc *runCtx, n *node) (strided, error) {
	r := v.rank
	if v.strides[r-1] == 1 && (v.strides[r-2] >= v.shape[r-1] || v.shape[r-2] == 1) {
		return v, nil
	}
	shape := slices.Clone(v.shape[:r])
	c, err := gather(rc, n, &value{dtype: Float32, shape: shape, data: v.data}, view{strides: slices.Clone(v.strides[:r])}, shape)
	if err != nil {
		return strided{}, err
	}
	return denseView(c.data.([]float32), shape), nil
}

// attend computes the chain with kernels.AttendBatch, or reports false if
// some run-time check fails. It fails only when the run must stop: out of
// budget, or the context done.
func (fa *fusedAttention) attend(rc *runCtx, n *node, in []*value) (*value, bool, error) {
	q, ok1 := viewOf(in[fa.q.arg], fa.q.perm)
	kt, ok2 := viewOf(in[fa.kt.arg], fa.kt.perm)
	v, ok3 := viewOf(in[fa.v.arg], fa.v.perm)
	if !ok1 || !ok2 || !ok3 {
		return nil, false, nil
	}
	r := q.rank
	batch := q.shape[:r-2]
	if kt.rank != r || v.rank != r || !equalShapes(kt.shape[:r-2], batch) || !equalShapes(v.shape[:r-2], batch) {
		return nil, false, nil
	}
	tq, d, tk, dv := q.shape[r-2], q.shape[r-1], kt.shape[r-1], v.shape[r-1]
	if kt.shape[r-2] != d || v.shape[r-2] != tk || tq == 0 || d == 0 || tk == 0 || dv == 0 || numel(batch) == 0 {
		return nil, false, nil
	}
	opt, added, ok := fa.options(rc, in, r, tq, tk)
	if err := rc.err(); err != nil {
		return nil, false, err
	}
	if !ok || !fa.softmaxOnLastAxis(r) {
		return nil, false, nil
	}
	q, err := q.rows(rc, n)
	if err != nil {
		return nil, false, err
	}
	k, err := kt.swapLast().rows(rc, n)
	if err != nil {
		return nil, false, err
	}
	if v, err = v.rows(rc, n); err != nil {
		return nil, false, err
	}
	if added && tq > 1 && !kernels.FiniteScores(q.data, k.data, d, opt.Scale) {
		return nil, false, nil // Add(S, mask) must see the hidden scores
	}

	// o is the output as the heads write it, (batch…, tq, dv); shape is
	// the node's output, o's axes in the trailing Transpose's order.
	o := strided{rank: r, shape: q.shape}
	o.shape[r-1] = dv
	shape := make([]int, r) // the value keeps it
	copy(shape, o.shape[:r])
	var perm [maxViewRank]int
	for i := range r {
		perm[i] = i
	}
	if fa.outPerm != nil {
		if len(fa.outPerm) != r {
			return nil, false, nil
		}
		var seen [maxViewRank]bool
		for i, p := range fa.outPerm {
			ax, err := normalizeAxis(int(p), r)
			if err != nil || seen[ax] {
				return nil, false, nil
			}
			seen[ax], perm[i] = true, ax
			shape[i] = o.shape[ax]
		}
	}
	step := 1
	for i := r - 1; i >= 0; i-- {
		o.strides[perm[i]] = step
		step *= shape[i]
	}
	out, err := rc.alloc(n, Float32, shape)
	if err != nil {
		return nil, false, err
	}
	o.data = out.data.([]float32)

	heads, err := scratch[kernels.Head](rc, n, numel(batch), "attention heads")
	if err != nil {
		return nil, false, err
	}
	var idx [maxViewRank]int
	for h := range heads {
		heads[h] = kernels.Head{
			Q: q.data[offset(&idx, &q.strides, r-2):], LdQ: q.strides[r-2],
			K: k.data[offset(&idx, &k.strides, r-2):], LdK: k.strides[r-2],
			V: v.data[offset(&idx, &v.strides, r-2):], LdV: v.strides[r-2],
			Out: o.data[offset(&idx, &o.strides, r-2):], LdOut: o.strides[r-2],
			Tq: tq, Tk: tk, D: d, Dv: dv,
		}
		for a := r - 3; a >= 0; a-- { // next batch index
			if idx[a]++; idx[a] < batch[a] {
				break
			}
			idx[a] = 0
		}
	}
	if err := attendBatch(rc, heads, opt); err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// offset is where the batch index idx (its first axes of them) starts in a
// view with these strides.
func offset(idx, strides *[maxViewRank]int, axes int) int {
	off := 0
	for a := range axes {
		off += idx[a] * strides[a]
	}
	return off
}

// options derives the kernel's scale and causal flag from the steps, or
// reports false if a scale is not a positive finite scalar or a mask is
// neither exactly causal nor hides nothing. r is the scores' rank. added
// says the causal mask is an Add, not a Where.
func (fa *fusedAttention) options(rc *runCtx, in []*value, r, tq, tk int) (opt kernels.AttentionOptions, added, ok bool) {
	opt = kernels.AttentionOptions{Scale: 1, EmptyRowsNaN: true}
	for _, st := range fa.steps {
		x := in[st.arg]
		if x.rank() > r {
			return opt, false, false // it would broadcast the scores up
		}
		var m maskPattern
		switch st.kind {
		case stepScale:
			c, ok := scalar32(x)
			if !ok || !(c > 0) || math.IsInf(float64(c), 0) {
				return opt, false, false
			}
			if st.onDiv {
				c = 1 / c
			}
			opt.Scale *= c
			continue
		case stepWhere:
			fill := in[st.fill]
			if c, ok := scalar32(fill); !ok || fill.rank() > r || !math.IsInf(float64(c), -1) {
				return opt, false, false
			}
			m = boolMask(rc, x, st.keep, tq, tk)
		case stepAdd:
			m = floatMask(rc, x, tq, tk)
		}
		switch m {
		case maskNone:
		case maskCausal:
			opt.Causal, added = true, st.kind == stepAdd
		default:
			return opt, false, false
		}
	}
	return opt, added, opt.Scale > 0 && !math.IsInf(float64(opt.Scale), 0)
}

// softmaxOnLastAxis reports whether the chain's Softmax normalizes the
// last axis of rank-r scores (at every opset: before 13, axis r−1 flattens
// to the same rows).
func (fa *fusedAttention) softmaxOnLastAxis(r int) bool {
	def := int64(-1)
	if fa.softmax.opset < 13 {
		def = 1
	}
	axis, err := normalizeAxis(int(fa.softmax.attrInt("axis", def)), r)
	return err == nil && axis == r-1
}

// scalar32 returns the element of a one-element float32 value.
func scalar32(x *value) (float32, bool) {
	data, ok := x.data.([]float32)
	if !ok || len(data) != 1 || x.size() != 1 {
		return 0, false
	}
	return data[0], true
}

// maskPattern is what a mask hides.
type maskPattern int

const (
	maskOther  maskPattern = iota // anything else: not fusable
	maskNone                      // no key from any query
	maskCausal                    // exactly the keys after each query's diagonal
)

// maskLayout returns how a mask of shape ms broadcasts over tq×tk scores:
// its row and column strides (0 to repeat); ok is false unless all its
// other axes have size 1 and it broadcasts without growing.
func maskLayout(ms []int, tq, tk int) (rowStride, colStride int, ok bool) {
	rows, cols := 1, 1
	if len(ms) >= 1 {
		cols = ms[len(ms)-1]
	}
	if len(ms) >= 2 {
		rows = ms[len(ms)-2]
	}
	if rows != 1 && rows != tq || cols != 1 && cols != tk || numel(ms) != rows*cols {
		return 0, 0, false
	}
	if rows > 1 {
		rowStride = cols
	}
	if cols > 1 {
		colStride = 1
	}
	return rowStride, colStride, true
}

// classify reports what hidden(i, j) hides over tq×tk scores; maskOther
// when the run's context is done before it knows.
func classify(rc *runCtx, tq, tk int, hidden func(i, j int) bool) maskPattern {
	none, causal := true, true
	frontier := attn.Frontier{Causal: true, Left: -1, Right: -1} // aligned bottom-right, as the kernel's
	for i := range tq {
		if rc.err() != nil {
			return maskOther
		}
		for j := range tk {
			h := hidden(i, j)
			none = none && !h
			causal = causal && h == frontier.Hides(i+tk-tq, j)
		}
		if !none && !causal {
			return maskOther
		}
	}
	switch {
	case none:
		return maskNone
	case causal:
		return maskCausal
	}
	return maskOther
}

// boolMask classifies a Where condition: true hides a key, or shows it
// when keep is set.
func boolMask(rc *runCtx, x *value, keep bool, tq, tk int) maskPattern {
	data, ok := x.data.([]bool)
	rs, cs, fits := maskLayout(x.shape, tq, tk)
	if !ok || !fits {
		return maskOther
	}
	return classify(rc, tq, tk, func(i, j int) bool { return data[i*rs+j*cs] != keep })
}

// floatMask classifies an additive mask: 0 shows a key, −inf hides it,
// any other value is not a mask the kernel can apply exactly.
func floatMask(rc *runCtx, x *value, tq, tk int) maskPattern {
	data, ok := x.data.([]float32)
	rs, cs, fits := maskLayout(x.shape, tq, tk)
	if !ok || !fits {
		return maskOther
	}
	for _, m := range data {
		if m != 0 && !math.IsInf(float64(m), -1) {
			return maskOther
		}
	}
	return classify(rc, tq, tk, func(i, j int) bool { return data[i*rs+j*cs] != 0 })
}

// skipTransposeForShape makes each Shape node that reads a Transpose's
// output read the Transpose's input and permute the dimensions itself, so
// that a Transpose kept only for its shape (PyTorch exports K's for the
// 1/√dₖ scale) is no longer computed.
func skipTransposeForShape(f *fuser, order []*node) []*node {
	for i, n := range order {
		if n.op != "Shape" || len(n.attrs) > 0 || len(n.in) != 1 {
			continue
		}
		t := f.producer(n.in[0])
		if t == nil || t.op != "Transpose" || !t.has("perm") || f.removed[t] {
			continue
		}
		perm, _ := t.attrInts("perm")
		m := *n
		m.in, m.inName = []int{t.in[0]}, []string{t.inName[0]}
		m.spec = &opSpec{minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: permutedShapeOp(perm)}
		order[i] = &m
	}
	return order
}

// permutedShapeOp returns the op computing Shape(Transpose(x, perm)) from x.
func permutedShapeOp(perm []int64) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		x := in[0]
		if len(perm) != x.rank() {
			return nil, fmt.Errorf("the Transpose before it has perm %v with %d entries for rank %d", perm, len(perm), x.rank())
		}
		axes, err := normalizeAxes(perm, x.rank())
		if err != nil {
			return nil, fmt.Errorf("the Transpose before it has perm %v: %w", perm, err)
		}
		dims := make([]int64, len(axes))
		for i, a := range axes {
			dims[i] = int64(x.shape[a])
		}
		return one(valueOf([]int{len(dims)}, dims))
	}
}

// attentionRuns reports how many fused attention nodes the graph has and
// how often they ran the fused kernel and the original nodes; tests use it
// to see which path was taken.
func (g *Graph) attentionRuns() (nodes int, fused, fallback int64) {
	for _, fa := range g.attention {
		fused += fa.fast.Load()
		fallback += fa.slow.Load()
	}
	return len(g.attention), fused, fallback
}
