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
// seen through the perm of a Transpose the fused node skips (nil if none),
// and through the head repetition of grouped-query attention (rep, nil if
// none).
type operand struct {
	arg  int
	perm []int64
	rep  *repeat
}

// repeat is how PyTorch's exports repeat the key and value heads of
// grouped-query attention (transformers' repeat_kv): Reshape(Expand(
// Unsqueeze(X, a), shape), target) makes every head of X n heads. The
// fused node reads X's heads in place instead; the three nodes and their
// side inputs (indexes into the fused node's inputs, -1 if absent) are
// checked on every run.
type repeat struct {
	unsqueeze, expand, reshape *node
	axes, shape, target        int
}

// fusedAttention is the plan of one fused node.
type fusedAttention struct {
	q, kt, v operand
	steps    []chainStep
	softmax  *node   // for its axis and opset
	outPerm  []int64 // the trailing Transpose's perm, nil if none
	// scales are the fused node's inputs that Q or Kᵀ were multiplied by
	// (Mul(Q, c), Mul(Kᵀ, c)): each multiplies the scores.
	scales []int
	// nanGuard says the softmax's result went through Where(IsNaN(P), c,
	// P): the fused result stands only when it has no NaN (then neither
	// had P), else the original nodes run.
	nanGuard bool
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
	guard := f.nanGuard(sm)
	if guard != nil {
		sm = f.producer(guard[1].in[2])
	}
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
	chain = append(chain, sm)
	chain = append(chain, guard...)
	chain = append(chain, mm2)
	if t := f.outTranspose(mm2); t != nil {
		chain = append(chain, t)
	}
	for _, n := range chain {
		if f.removed[n] { // part of an earlier chain
			return nil, nil, nil
		}
	}

	var c chainInputs
	fa := &fusedAttention{softmax: sm, out: chain[len(chain)-1].out[0], nanGuard: guard != nil}
	var pre []*node
	for _, x := range []struct {
		op     *operand
		n      *node
		k      int
		scaled bool
	}{{&fa.q, mm1, 0, true}, {&fa.kt, mm1, 1, true}, {&fa.v, mm2, 1, false}} {
		pre = append(pre, f.operand(x.op, &c, x.n, x.k, x.scaled, &fa.scales)...)
	}
	if guard != nil { // the fallback's Where reads its fill
		c.arg(guard[1].in[1], guard[1].inName[1])
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

// nanGuard returns the IsNaN and Where nodes when w is Where(IsNaN(P), c,
// P) with P a Softmax's result that nothing else reads (PyTorch's export
// of scaled_dot_product_attention zeroes the NaN weights of a query that
// sees no key), else nil.
func (f *fuser) nanGuard(w *node) []*node {
	if w == nil || w.op != "Where" || len(w.in) != 3 || len(w.out) != 1 || slices.Contains(w.in, -1) {
		return nil
	}
	isNaN := f.producer(w.in[0])
	p := w.in[2]
	if isNaN == nil || isNaN.op != "IsNaN" || len(isNaN.in) != 1 || isNaN.in[0] != p || !f.private(w.in[0]) {
		return nil
	}
	if sm := f.producer(p); sm == nil || sm.op != "Softmax" {
		return nil
	}
	readers := f.uses.Readers(p)
	if len(readers) != 2 || f.uses.IsOutput(p) || w.in[1] == p {
		return nil
	}
	for _, r := range readers {
		if r != w && r != isNaN {
			return nil
		}
	}
	return []*node{isNaN, w}
}

// operand finds where the fused node reads input k of product n, looking
// back through what it can read in place: a Transpose, grouped-query
// attention's head repetition (repeat) and, when scaled, Mul by a
// constant scalar, whose input index it adds to scales. It returns the
// nodes looked through, in the order they run, for the fallback.
func (f *fuser) operand(op *operand, c *chainInputs, n *node, k int, scaled bool, scales *[]int) []*node {
	s, name := n.in[k], n.inName[k]
	var seen []*node // outermost first
	for {
		p := f.producer(s)
		if p == nil || f.removed[p] || len(p.out) != 1 {
			break
		}
		if scaled && p.op == "Mul" && len(p.in) == 2 {
			if x, cst, ok := f.scalarSide(p); ok {
				*scales = append(*scales, c.arg(p.in[cst], p.inName[cst]))
				s, name = p.in[x], p.inName[x]
				seen = append(seen, p)
				continue
			}
		}
		if p.op == "Transpose" && p.has("perm") && op.perm == nil && op.rep == nil {
			op.perm, _ = p.attrInts("perm")
			s, name = p.in[0], p.inName[0]
			seen = append(seen, p)
			continue
		}
		if rep, nodes := f.repeatOf(p, c); rep != nil {
			op.rep = rep
			s, name = nodes[2].in[0], nodes[2].inName[0]
			seen = append(seen, nodes...)
		}
		break
	}
	op.arg = c.arg(s, name)
	slices.Reverse(seen)
	return seen
}

// scalarSide returns which input of Mul node p is the tensor and which a
// one-element constant, if one is.
func (f *fuser) scalarSide(p *node) (x, cst int, ok bool) {
	for cst = range 2 {
		if s := p.in[cst]; s >= 0 && p.in[1-cst] >= 0 {
			if v := f.g.consts[s]; v != nil && v.size() == 1 && v.dtype == Float32 {
				return 1 - cst, cst, true
			}
		}
	}
	return 0, 0, false
}

// repeatOf matches r as the Reshape of grouped-query attention's head
// repetition, Reshape(Expand(Unsqueeze(X))), and returns it with the
// Reshape, Expand and Unsqueeze nodes, or nil.
func (f *fuser) repeatOf(r *node, c *chainInputs) (*repeat, []*node) {
	if r.op != "Reshape" || len(r.in) != 2 || r.in[1] < 0 {
		return nil, nil
	}
	e := f.producer(r.in[0])
	if e == nil || e.op != "Expand" || f.removed[e] || len(e.in) != 2 || len(e.out) != 1 || e.in[1] < 0 {
		return nil, nil
	}
	u := f.producer(e.in[0])
	if u == nil || u.op != "Unsqueeze" || f.removed[u] || len(u.in) < 1 || len(u.out) != 1 {
		return nil, nil
	}
	rep := &repeat{unsqueeze: u, expand: e, reshape: r, axes: -1}
	if len(u.in) > 1 && u.in[1] >= 0 {
		rep.axes = c.arg(u.in[1], u.inName[1])
	}
	rep.shape = c.arg(e.in[1], e.inName[1])
	rep.target = c.arg(r.in[1], r.inName[1])
	return rep, []*node{r, e, u}
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
	if ok && fa.nanGuard && slices.ContainsFunc(out.data.([]float32), isNaN32) {
		ok = false // Where(IsNaN(P), c, P) changes P: run it
	}
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

// isNaN32 reports whether x is NaN.
func isNaN32(x float32) bool { return x != x }

// runOriginal runs the nodes a fused node replaced, in order, on the fused
// node's inputs (in, read from slots), and returns the values of the
// slots outs. Like the graph's run, it checks the run's context between
// nodes and lets each intermediate go once its last reader has run.
func runOriginal(rc *runCtx, nodes []*node, slots []int, in []*value, outs ...int) ([]*value, error) {
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
	defer func() { // whatever is left: the results (held again by the caller) and unread outputs
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
		made, err := c.spec.run(rc, c, args)
		if err != nil {
			return nil, fmt.Errorf("node %s (%s): %w", c.label(), c.op, err)
		}
		for k, s := range c.out {
			if s >= 0 && k < len(made) {
				env[s] = made[k]
				rc.hold(made[k])
			}
		}
		for _, s := range c.in {
			if reads[s]--; reads[s] == 0 && !slices.Contains(outs, s) && !slices.Contains(slots, s) {
				rc.drop(env[s])
				delete(env, s)
			}
		}
		rc.settle()
	}
	results := make([]*value, len(outs))
	for i, s := range outs {
		results[i] = env[s]
	}
	return results, nil
}

// strided is a float32 array seen through strides: an operand of the
// attention, its last two axes the rows and columns of every head. Its
// shape and strides are arrays, not slices, so that a run's views cost
// no allocation.
type strided struct {
	data           []float32
	rank           int
	shape, strides [maxViewRank]int
	// div repeats indexes of a batch axis: index i of axis a reads index
	// i/div[a] (0 and 1: itself), the heads of grouped-query attention.
	div [maxViewRank]int
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

// view returns the operand's view of the fused node's inputs, or false
// when the run's values do not fit it (see viewOf and repeat.view).
func (op *operand) view(rc *runCtx, in []*value) (strided, bool) {
	if op.rep == nil {
		return viewOf(in[op.arg], op.perm)
	}
	v, ok := op.rep.view(rc, in, in[op.arg])
	if !ok || op.perm == nil {
		return v, ok
	}
	if len(op.perm) != v.rank {
		return strided{}, false
	}
	w := strided{data: v.data, rank: v.rank}
	var seen [maxViewRank]bool
	for i, p := range op.perm {
		if p < 0 || p >= int64(v.rank) || seen[p] {
			return strided{}, false
		}
		seen[p] = true
		w.shape[i], w.strides[i], w.div[i] = v.shape[p], v.strides[p], v.div[p]
	}
	return w, true
}

// view returns X's heads repeated as the Reshape's result sees them, or
// false unless the run's Unsqueeze inserts one axis a before X's last two
// (after at least one), the Expand repeats that axis only, and the Reshape
// merges it into the axis before.
func (rp *repeat) view(rc *runCtx, in []*value, x *value) (strided, bool) {
	data, ok := x.data.([]float32)
	r := x.rank()
	if !ok || r < 3 || r > maxViewRank {
		return strided{}, false
	}
	var axesIn *value
	if rp.axes >= 0 {
		axesIn = in[rp.axes]
	}
	axes, ok, err := axesOf(rc, rp.unsqueeze, []*value{x, axesIn}, 13)
	if err != nil || !ok || len(axes) != 1 {
		return strided{}, false
	}
	a, err := normalizeAxis(int(axes[0]), r+1)
	if err != nil || a < 1 || a > r-2 {
		return strided{}, false
	}
	target, err := shapeInput(rc, rp.expand, in[rp.shape])
	if err != nil || len(target) > r+1 {
		return strided{}, false
	}
	var u [maxViewRank + 1]int // X unsqueezed, then expanded
	copy(u[:a], x.shape[:a])
	u[a] = 1
	copy(u[a+1:], x.shape[a:])
	off := r + 1 - len(target)
	for i, t := range target {
		switch d := u[off+i]; {
		case t == d || t == 1:
		case d == 1 && off+i == a:
			u[a] = t
		default:
			return strided{}, false
		}
	}
	n := u[a]
	spec, err := ints(rc, rp.reshape, in[rp.target])
	if err != nil || n < 1 {
		return strided{}, false
	}
	shape, err := reshapeTarget(u[:r+1], spec, rp.reshape.attrInt("allowzero", 0) == 1)
	if err != nil || len(shape) != r {
		return strided{}, false
	}
	v := denseView(data, x.shape)
	for i := range r {
		want := x.shape[i]
		if i == a-1 {
			want *= n
		}
		if shape[i] != want {
			return strided{}, false
		}
	}
	v.shape[a-1] *= n
	v.div[a-1] = n
	return v, true
}

// swapLast returns the view with its last two axes exchanged.
func (v strided) swapLast() strided {
	r := v.rank
	v.shape[r-2], v.shape[r-1] = v.shape[r-1], v.shape[r-2]
	v.strides[r-2], v.strides[r-1] = v.strides[r-1], v.strides[r-2]
	return v
}

// batchDiv reports whether the view repeats indexes of batch axes only.
func (v *strided) batchDiv() bool {
	return v.div[v.rank-1] <= 1 && v.div[v.rank-2] <= 1
}

// repeats reports whether the view repeats indexes of some axis.
func (v *strided) repeats() bool {
	for _, d := range v.div[:v.rank] {
		if d > 1 {
			return true
		}
	}
	return false
}

// denseRows reports whether the view's rows are contiguous and apart.
func (v *strided) denseRows() bool {
	r := v.rank
	return v.strides[r-1] == 1 && (v.strides[r-2] >= v.shape[r-1] || v.shape[r-2] == 1)
}

// rows returns the view with dense rows, as kernels.Head needs: itself, or
// a contiguous copy, allocated for node n, when its columns are not
// adjacent in memory. A view that repeats heads must have dense rows.
func (v strided) rows(rc *runCtx, n *node) (strided, error) {
	r := v.rank
	if v.denseRows() {
		return v, nil
	}
	if v.repeats() {
		return strided{}, fmt.Errorf("internal error: a view of repeated heads with rows that are not dense")
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
	q, ok1 := fa.q.view(rc, in)
	kt, ok2 := fa.kt.view(rc, in)
	v, ok3 := fa.v.view(rc, in)
	if !ok1 || !ok2 || !ok3 || !q.batchDiv() || !kt.batchDiv() || !v.batchDiv() {
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
	opt, mask, added, ok := fa.options(rc, n, in, batch, tq, tk)
	if err := rc.err(); err != nil {
		return nil, false, err
	}
	if !ok || !fa.softmaxOnLastAxis(r) {
		return nil, false, nil
	}
	k := kt.swapLast()
	if (q.repeats() || k.repeats() || v.repeats()) && !(q.denseRows() && k.denseRows() && v.denseRows()) {
		return nil, false, nil // repeated heads are read in place only
	}
	q, err := q.rows(rc, n)
	if err != nil {
		return nil, false, err
	}
	k, err = k.rows(rc, n)
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
	// The heads cover the output and the kernel writes every row of each
	// (zeros or NaN for a row that sees no key), so a planned buffer is
	// not zeroed first.
	out, err := rc.allocFull(n, Float32, shape)
	if err != nil {
		return nil, false, err
	}
	o.data = out.data.([]float32)

	heads, headBytes, err := rc.headList(numel(batch))
	if err != nil {
		return nil, false, err
	}
	defer rc.dropHeads(heads, headBytes)
	var idx [maxViewRank]int
	for h := range heads {
		heads[h] = kernels.Head{
			Q: q.data[q.offset(&idx, r-2):], LdQ: q.strides[r-2],
			K: k.data[k.offset(&idx, r-2):], LdK: k.strides[r-2],
			V: v.data[v.offset(&idx, r-2):], LdV: v.strides[r-2],
			Out: o.data[o.offset(&idx, r-2):], LdOut: o.strides[r-2],
			Tq: tq, Tk: tk, D: d, Dv: dv,
		}
		if mask.data != nil {
			heads[h].Mask, heads[h].LdMask = mask.at(&idx, batch), mask.rowStride
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

// offset is where the batch index idx (its first axes of them) starts in
// the view.
func (v *strided) offset(idx *[maxViewRank]int, axes int) int {
	off := 0
	for a := range axes {
		i := idx[a]
		if d := v.div[a]; d > 1 {
			i /= d
		}
		off += i * v.strides[a]
	}
	return off
}

// options derives the kernel's scale and causal flag from the steps, or
// reports false if a scale is not a positive finite scalar or a mask is
// neither exactly causal nor hides nothing (in every batch slice alike).
// batch is the scores' batch axes. added says the causal mask is an Add,
// not a Where.
//
// An additive mask of any other values (a padding mask: BERT adds the
// dtype's lowest value, not −inf, to hide the padding) is returned as
// general, to be added by the kernel, when it is float32, has a row of
// Tk keys per query or one for all, and no scale follows it in the chain.
func (fa *fusedAttention) options(rc *runCtx, n *node, in []*value, batch []int, tq, tk int) (opt kernels.AttentionOptions, general addedMask, added, ok bool) {
	r := len(batch) + 2
	opt = kernels.AttentionOptions{Scale: 1, EmptyRowsNaN: true}
	for _, arg := range fa.scales {
		c, ok := scalar32(in[arg])
		if !ok || !(c > 0) || math.IsInf(float64(c), 0) {
			return opt, general, false, false
		}
		opt.Scale *= c
	}
	for _, st := range fa.steps {
		x := in[st.arg]
		if x.rank() > r || st.kind != stepScale && !maskBroadcasts(x.shape, batch) {
			return opt, general, false, false // it would broadcast the scores up
		}
		var m maskPattern
		switch st.kind {
		case stepScale:
			c, ok := scalar32(x)
			if !ok || !(c > 0) || math.IsInf(float64(c), 0) || general.data != nil {
				return opt, general, false, false
			}
			if st.onDiv {
				c = 1 / c
			}
			opt.Scale *= c
			continue
		case stepWhere:
			fill := in[st.fill]
			if c, ok := scalar32(fill); !ok || fill.rank() > r || !math.IsInf(float64(c), -1) {
				return opt, general, false, false
			}
			m = rc.staticPattern(n, st.arg, x, st.keep, tq, tk, boolMask)
		case stepAdd:
			m = rc.staticPattern(n, st.arg, x, false, tq, tk, func(rc *runCtx, x *value, _ bool, tq, tk int) maskPattern {
				return floatMask(rc, x, tq, tk)
			})
			if m == maskOther {
				if general, ok = generalMask(x, tq, tk); !ok {
					return opt, general, false, false
				}
				continue
			}
		}
		switch m {
		case maskNone:
		case maskCausal:
			opt.Causal, added = true, st.kind == stepAdd
		default:
			return opt, general, false, false
		}
	}
	return opt, general, added, opt.Scale > 0 && !math.IsInf(float64(opt.Scale), 0)
}

// addedMask is an additive mask the kernel adds to the scores itself
// (kernels.Head.Mask): data holds slices of rows×Tk values, one per index
// of the mask's leading axes (lead, which broadcast over the scores'
// batch axes); rowStride is 0 when one row serves every query.
type addedMask struct {
	data      []float32
	lead      []int
	rowStride int
	slice     int
}

// generalMask reads x as an addedMask for tq×tk scores, or reports false.
func generalMask(x *value, tq, tk int) (addedMask, bool) {
	data, ok := x.data.([]float32)
	rs, cs, _, fits := maskLayout(x.shape, tq, tk)
	if !ok || !fits || cs == 0 && tk > 1 || len(data) < x.size() {
		return addedMask{}, false
	}
	rows := 1
	if rs > 0 {
		rows = tq
	}
	return addedMask{data: data, lead: x.shape[:max(x.rank()-2, 0)], rowStride: rs, slice: rows * tk}, true
}

// at returns the mask's rows for the scores' batch index idx (of the
// batch axes batch).
func (m *addedMask) at(idx *[maxViewRank]int, batch []int) []float32 {
	off := len(batch) - len(m.lead)
	s := 0
	for i, d := range m.lead {
		s *= d
		if d != 1 {
			s += idx[off+i]
		}
	}
	return m.data[s*m.slice:]
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
//
// A mask with batch axes (a padding mask of several sequences) has one
// rows×cols slice per batch index; slices is their number, each the next
// rows·cols elements.
func maskLayout(ms []int, tq, tk int) (rowStride, colStride, slices int, ok bool) {
	rows, cols := 1, 1
	if len(ms) >= 1 {
		cols = ms[len(ms)-1]
	}
	if len(ms) >= 2 {
		rows = ms[len(ms)-2]
	}
	if rows != 1 && rows != tq || cols != 1 && cols != tk {
		return 0, 0, 0, false
	}
	if rows > 1 {
		rowStride = cols
	}
	if cols > 1 {
		colStride = 1
	}
	return rowStride, colStride, numel(ms) / max(rows*cols, 1), true
}

// maskBroadcasts reports whether a mask of shape ms broadcasts over scores
// of batch axes batch without growing them.
func maskBroadcasts(ms, batch []int) bool {
	lead := ms[:max(len(ms)-2, 0)]
	if len(lead) > len(batch) {
		return false
	}
	off := len(batch) - len(lead)
	for i, m := range lead {
		if m != 1 && m != batch[off+i] {
			return false
		}
	}
	return true
}

// classifySlices classifies every rows×cols slice of a mask with
// classify, hidden reading slice s; the mask has a pattern when all its
// slices have the same one.
func classifySlices(rc *runCtx, slices, tq, tk int, hidden func(s, i, j int) bool) maskPattern {
	p := maskOther
	for s := range slices {
		q := classify(rc, tq, tk, func(i, j int) bool { return hidden(s, i, j) })
		if q == maskOther || s > 0 && q != p {
			return maskOther
		}
		p = q
	}
	return p
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
	rs, cs, slices, fits := maskLayout(x.shape, tq, tk)
	if !ok || !fits {
		return maskOther
	}
	step := len(data) / max(slices, 1)
	return classifySlices(rc, slices, tq, tk, func(s, i, j int) bool { return data[s*step+i*rs+j*cs] != keep })
}

// floatMask classifies an additive mask: 0 shows a key, −inf hides it,
// any other value is not a mask the kernel can apply exactly.
func floatMask(rc *runCtx, x *value, tq, tk int) maskPattern {
	data, ok := x.data.([]float32)
	rs, cs, slices, fits := maskLayout(x.shape, tq, tk)
	if !ok || !fits {
		return maskOther
	}
	zeros := true
	for _, m := range data {
		if m != 0 && !math.IsInf(float64(m), -1) {
			return maskOther
		}
		zeros = zeros && m == 0
	}
	if zeros { // a padding mask without padding: no need to walk tq×tk per slice
		return maskNone
	}
	step := len(data) / max(slices, 1)
	return classifySlices(rc, slices, tq, tk, func(s, i, j int) bool { return data[s*step+i*rs+j*cs] != 0 })
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
