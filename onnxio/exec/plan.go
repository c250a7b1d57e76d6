package exec

import (
	"context"
	"reflect"
	"slices"
	"sync"

	"github.com/attnrun/attnrun/internal/budget"
)

// Run plans. Most of a graph's nodes compute nothing that depends on the
// input values: the shape arithmetic an exporter writes around every
// Reshape (Shape, Gather, Unsqueeze, Concat), masks sliced from a
// constant, scales. For one input shape signature their results never
// change, and neither do the sizes and lifetimes of everything else the
// run allocates. So a run of a signature seen once before records them
// (see planCache), and later runs with the same signature follow a plan:
//
//   - nodes whose inputs are all constant for the signature are skipped,
//     their outputs taken from the recording;
//   - Reshape, Squeeze, Unsqueeze, Flatten and Identity become views of
//     their input under the recorded shape, without running the op;
//   - every buffer an op allocates comes from an arena of the plan, where
//     buffers whose lifetimes do not overlap share memory; results handed
//     to the caller are allocated fresh, so the caller owns them.
//
// What a plan assumes is checked as the run goes: the input shapes of a
// skipped Shape or Size node and of a view, and the size of each
// allocation. A failed shape check sets the plan aside and runs the graph
// node by node again; an allocation of another size is made fresh.
// Arenas are taken one per run, so concurrent runs never share a buffer.

// maxPlans is how many input signatures a graph keeps plans for; the
// oldest is forgotten first.
const maxPlans = 8

// maxStaticBytes bounds the values a plan keeps from its recording
// (a causal mask sliced to T×T, say); past it, nodes run every time.
const maxStaticBytes = 64 << 20

// maxKeptArenaBytes bounds the buffers of an arena that a plan keeps for
// the next run; a larger arena (long inputs, whose products dwarf an
// allocation) is let go after its run, so that idle graphs do not hold
// the memory of their largest inputs.
const maxKeptArenaBytes = 64 << 20

// planKind is what a planned run does at a node.
type planKind uint8

const (
	stepRun   planKind = iota // run the op
	stepSkip                  // its outputs are in the plan's environment
	stepCheck                 // a skipped Shape or Size: check its input's shape
	stepView                  // a view of input 0 under the recorded shape
)

// nodePlan is the plan of one node.
type nodePlan struct {
	kind    planKind
	inShape []int // stepCheck, stepView: input 0's recorded shape
	shape   []int // stepView: the output's shape
}

// maxSeen is how many input signatures without a plan a graph remembers.
const maxSeen = 16

// planCache holds a graph's plans, newest last, and the signatures run
// once without one. A plan is recorded on a signature's second run, not
// its first: decoding token by token runs every signature once (the
// cache grows by one each step), and a recording it would never follow
// costs time and memory.
type planCache struct {
	mu   sync.Mutex
	list []*plan
	seen [][][]int // input shapes, in the order of Graph.inputs; oldest first
}

// plan is how runs of one input signature go.
type plan struct {
	shapes    [][]int    // the input shapes, in the order of Graph.inputs
	env       []*value   // by slot: the constants and the values fixed for the signature
	steps     []nodePlan // by node position
	allocs    []allocPlan
	bufs      []bufPlan
	arenas    chan *arena
	bufBytes  int64 // the arena's buffers, all together
	maxMemory int64 // each run's budget
	retired   bool  // a check failed: runs of this signature go node by node (guarded by planCache.mu)

	patternsMu sync.Mutex
	patterns   map[staticMask]maskPattern // what masks fixed for the signature hide
}

// staticMask names a mask the plan fixes for its signature (a causal mask
// sliced from a constant buffer), whose pattern is classified once.
type staticMask struct {
	n      *node
	arg    int // the node's input
	keep   bool
	tq, tk int
}

// allocPlan is where the run's i-th allocation goes.
type allocPlan struct {
	dtype DType
	elems int
	buf   int // index into plan.bufs, -1 for a fresh allocation
}

// bufPlan is one buffer of the arena.
type bufPlan struct {
	dtype DType
	elems int // the largest allocation it holds
}

// arena is the memory of one planned run at a time.
type arena struct {
	env    []*value
	bufs   []any    // by buffer: nil until first used
	views  []any    // by allocation: the buffer cut to its size, reused as is
	owner  []*block // by buffer: the block using it now
	values []value  // by allocation: the value alloc returns
	blocks []block  // by allocation
	steps  []value  // by node position: a view's value
	shapes [][]int  // by allocation: its shape (runCtx.shapeOf)
	rc     runCtx   // the run's context, its stacks kept
	budget *budget.Budget
}

// recorder collects what a plan needs during the first run of a
// signature.
type recorder struct {
	candidate []bool      // by node position: may be skipped or checked
	outs      [][]*value  // by node position: the outputs of candidates
	inShape   [][]int     // by node position: input 0's shape, for checks and views
	outShape  [][]int     // by node position: a view's output shape
	shares    []bool      // by node position: a view's output shares input 0's data
	allocs    []allocNote // in order
}

// allocNote is one allocation of the recorded run.
type allocNote struct {
	dtype DType
	elems int
	pos   int    // the node that made it
	blk   *block // its reservation; blk.released says when it was let go
}

// viewOps are the ops whose output is their first input under another
// shape, computed from the input's shape and the other (constant) inputs.
var viewOps = map[string]bool{"Reshape": true, "Squeeze": true, "Unsqueeze": true, "Flatten": true, "Identity": true}

// planFor returns the plan for the inputs' shapes, or nil (with a
// recorder for a new one when the graph may keep it).
func (g *Graph) planFor(inputs map[string]*value) (*plan, *recorder) {
	if g.plans == nil {
		return nil, nil
	}
	for _, info := range g.inputs {
		if inputs[info.Name] == nil {
			return nil, nil // the run reports it
		}
	}
	g.plans.mu.Lock()
	defer g.plans.mu.Unlock()
	for _, p := range g.plans.list {
		if p.matches(g, inputs) {
			if p.retired {
				return nil, nil
			}
			return p, nil
		}
	}
	if !g.plans.seenBefore(g, inputs) {
		return nil, nil
	}
	return nil, g.newRecorder()
}

// seenBefore reports whether the inputs' signature ran before without a
// plan, and remembers it if not (forgetting the oldest past maxSeen).
func (c *planCache) seenBefore(g *Graph, inputs map[string]*value) bool {
	for i, shapes := range c.seen {
		if sameSignature(g, inputs, shapes) {
			c.seen = slices.Delete(c.seen, i, i+1)
			return true
		}
	}
	if len(c.seen) == maxSeen {
		c.seen = slices.Delete(c.seen, 0, 1)
	}
	shapes := make([][]int, len(g.inputs))
	for i, info := range g.inputs {
		shapes[i] = slices.Clone(inputs[info.Name].shape)
	}
	c.seen = append(c.seen, shapes)
	return false
}

// sameSignature reports whether the inputs have the given shapes.
func sameSignature(g *Graph, inputs map[string]*value, shapes [][]int) bool {
	for i, info := range g.inputs {
		if !equalShapes(inputs[info.Name].shape, shapes[i]) {
			return false
		}
	}
	return true
}

// matches reports whether the inputs have the plan's shapes.
func (p *plan) matches(g *Graph, inputs map[string]*value) bool {
	return sameSignature(g, inputs, p.shapes)
}

// deterministic reports whether a node gives the same outputs for the same
// inputs every time: not random, and without a subgraph (which may read
// outer values that are not among its inputs).
func deterministic(n *node) bool {
	switch n.op {
	case "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli", "Multinomial", "Dropout":
		return false
	}
	for _, a := range n.attrs {
		if a.kind == attrGraph {
			return false
		}
	}
	return true
}

// newRecorder marks the nodes a plan may skip: deterministic nodes whose
// inputs are all constants or outputs of such nodes (graph inputs with a
// default value are not constants: a run may replace them), and Shape
// and Size nodes of anything.
func (g *Graph) newRecorder() *recorder {
	fixed := make([]bool, len(g.consts))
	for s, v := range g.consts {
		fixed[s] = v != nil
	}
	for _, s := range g.defaults {
		fixed[s] = false
	}
	r := &recorder{
		candidate: make([]bool, len(g.nodes)),
		outs:      make([][]*value, len(g.nodes)),
		inShape:   make([][]int, len(g.nodes)),
		outShape:  make([][]int, len(g.nodes)),
		shares:    make([]bool, len(g.nodes)),
	}
	for p, n := range g.nodes {
		ok := deterministic(n)
		if n.op != "Shape" && n.op != "Size" {
			for _, s := range n.in {
				ok = ok && (s < 0 || fixed[s])
			}
		}
		r.candidate[p] = ok
		for _, s := range n.out {
			if s >= 0 {
				fixed[s] = ok
			}
		}
	}
	return r
}

// node records node p's inputs and outputs after it ran.
func (r *recorder) node(p int, n *node, in, outs []*value) {
	if len(in) > 0 && in[0] != nil {
		r.inShape[p] = slices.Clone(in[0].shape)
	}
	if r.candidate[p] {
		r.outs[p] = slices.Clone(outs[:len(n.out)])
	}
	if viewOps[n.op] && len(outs) > 0 && outs[0] != nil && len(in) > 0 && in[0] != nil {
		r.shares[p] = sameData(in[0].data, outs[0].data)
		r.outShape[p] = slices.Clone(outs[0].shape)
	}
}

// sameData reports whether two data slices are the same memory.
func sameData(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Type() == vb.Type() && va.Len() == vb.Len() && (va.Len() == 0 || va.Pointer() == vb.Pointer())
}

// build makes the plan of the recorded run of inputs.
func (r *recorder) build(g *Graph, inputs map[string]*value) *plan {
	p := &plan{env: slices.Clone(g.consts), steps: make([]nodePlan, len(g.nodes)), arenas: make(chan *arena, 2), maxMemory: g.maxMemory}
	for _, info := range g.inputs {
		p.shapes = append(p.shapes, slices.Clone(inputs[info.Name].shape))
	}
	fixed := make([]bool, len(g.consts))
	for s, v := range g.consts {
		fixed[s] = v != nil
	}
	for _, s := range g.defaults {
		fixed[s] = false
	}
	var kept int64
	for pos, n := range g.nodes {
		p.steps[pos] = r.step(pos, n, fixed, &kept)
		if k := p.steps[pos].kind; k == stepSkip || k == stepCheck {
			for i, s := range n.out {
				if s >= 0 {
					fixed[s] = true
					// A copy: the recorded run may hand its value to its caller.
					v := r.outs[pos][i]
					p.env[s] = &value{dtype: v.dtype, shape: slices.Clone(v.shape), data: cloneData(v.data)}
				}
			}
		}
	}
	var runs []allocNote // the allocations of the nodes planned runs run
	for _, a := range r.allocs {
		if p.steps[a.pos].kind == stepRun {
			runs = append(runs, a)
		}
	}
	p.planBuffers(runs)
	return p
}

// step decides what planned runs do at node pos.
func (r *recorder) step(pos int, n *node, fixed []bool, kept *int64) nodePlan {
	outs := r.outs[pos]
	if r.candidate[pos] && outs != nil {
		all, rest := true, true // all inputs fixed; all but input 0
		for i, s := range n.in {
			all = all && (s < 0 || fixed[s])
			rest = rest && (i == 0 || s < 0 || fixed[s])
		}
		if !all && (n.op != "Shape" && n.op != "Size" || !rest) {
			return nodePlan{}
		}
		var bytes int64
		for _, v := range outs {
			if v == nil {
				return nodePlan{}
			}
			bytes += int64(v.size()) * int64(v.dtype.size())
		}
		if *kept+bytes <= maxStaticBytes {
			*kept += bytes
			if all {
				return nodePlan{kind: stepSkip}
			}
			return nodePlan{kind: stepCheck, inShape: r.inShape[pos]}
		}
		return nodePlan{}
	}
	if !viewOps[n.op] || !r.shares[pos] || len(n.out) != 1 || n.out[0] < 0 {
		return nodePlan{}
	}
	for _, s := range n.in[1:] {
		if s >= 0 && !fixed[s] {
			return nodePlan{}
		}
	}
	return nodePlan{kind: stepView, inShape: r.inShape[pos], shape: r.outShape[pos]}
}

// planBuffers gives each recorded allocation a buffer of the arena, the
// same buffer to allocations whose lifetimes do not overlap (first fit),
// or none to what outlives the run (the results).
func (p *plan) planBuffers(notes []allocNote) {
	type busy struct{ buf, until int }
	var inUse []busy
	var free []int
	for _, a := range notes {
		plan := allocPlan{dtype: a.dtype, elems: a.elems, buf: -1}
		for i := 0; i < len(inUse); {
			if inUse[i].until < a.pos {
				free = append(free, inUse[i].buf)
				inUse = slices.Delete(inUse, i, i+1)
				continue
			}
			i++
		}
		if a.blk != nil && a.blk.released >= 0 {
			best := -1
			for i, b := range free {
				if p.bufs[b].dtype == a.dtype && (best < 0 || absDiff(p.bufs[b].elems, a.elems) < absDiff(p.bufs[free[best]].elems, a.elems)) {
					best = i
				}
			}
			if best >= 0 {
				plan.buf = free[best]
				free = slices.Delete(free, best, best+1)
			} else {
				plan.buf = len(p.bufs)
				p.bufs = append(p.bufs, bufPlan{dtype: a.dtype})
			}
			p.bufs[plan.buf].elems = max(p.bufs[plan.buf].elems, a.elems)
			inUse = append(inUse, busy{plan.buf, a.blk.released})
		}
		p.allocs = append(p.allocs, plan)
	}
	for _, b := range p.bufs {
		p.bufBytes += int64(b.elems) * int64(b.dtype.size())
	}
}

func absDiff(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}

// getArena takes an idle arena of the plan or makes one.
func (p *plan) getArena(nodes int) *arena {
	select {
	case a := <-p.arenas:
		return a
	default:
	}
	return &arena{
		env:    make([]*value, len(p.env)),
		bufs:   make([]any, len(p.bufs)),
		views:  make([]any, len(p.allocs)),
		owner:  make([]*block, len(p.bufs)),
		values: make([]value, len(p.allocs)),
		blocks: make([]block, len(p.allocs)),
		steps:  make([]value, nodes),
		shapes: make([][]int, len(p.allocs)),
		budget: budget.New(p.maxMemory),
	}
}

// runCtx returns the arena's run context, ready for a run of the plan.
func (a *arena) runCtx(ctx context.Context, p *plan) *runCtx {
	if ctx == nil {
		ctx = context.Background()
	}
	rc := &a.rc
	*rc = runCtx{ctx: ctx, budget: a.budget, track: true, plan: p, arena: a, pending: rc.pending[:0], args: rc.args[:0], heads: rc.heads, results: rc.results}
	return rc
}

// putArena gives an arena back once its run is over: nothing the caller
// keeps points into its buffers (runOwned copied such results). A plan
// keeps up to two, of at most maxKeptArenaBytes each.
func (p *plan) putArena(a *arena) {
	if p.bufBytes > maxKeptArenaBytes {
		return
	}
	a.budget.Release(a.budget.Used())
	a.rc = runCtx{pending: a.rc.pending[:0], args: a.rc.args[:0], heads: a.rc.heads, results: a.rc.results}
	clear(a.env)
	clear(a.owner)
	clear(a.values)
	clear(a.steps)
	select {
	case p.arenas <- a:
	default:
	}
}

// allocFrom returns the planned buffer for the run's i-th allocation, of
// dt and elems, zeroed if zero is set, with its block; ok is false when
// the plan has none for it (the result, another size, or the buffer still
// in use), and the caller allocates.
func (rc *runCtx) allocFrom(dt DType, elems int, bytes int64, zero bool) (*value, *block, bool) {
	i := rc.allocs
	rc.allocs++
	p, a := rc.plan, rc.arena
	if i >= len(p.allocs) {
		return nil, nil, false
	}
	ap := p.allocs[i]
	if ap.buf < 0 || ap.dtype != dt || ap.elems != elems {
		return nil, nil, false
	}
	if o := a.owner[ap.buf]; o != nil && o.bytes > 0 {
		return nil, nil, false
	}
	if a.bufs[ap.buf] == nil {
		a.bufs[ap.buf] = makeSlice(dt, p.bufs[ap.buf].elems)
	}
	if a.views[i] == nil {
		a.views[i] = subslice(a.bufs[ap.buf], 0, elems)
	}
	data := a.views[i]
	if zero {
		clearData(data)
	}
	b := &a.blocks[i]
	*b = block{bytes: bytes, arena: true, released: -1}
	a.owner[ap.buf] = b
	v := &a.values[i]
	*v = value{dtype: dt, data: data, mem: b}
	return v, b, true
}

// clearData zeroes a data slice.
func clearData(data any) {
	switch d := data.(type) {
	case []float32:
		clear(d)
	case []float64:
		clear(d)
	case []int64:
		clear(d)
	case []int32:
		clear(d)
	case []bool:
		clear(d)
	case []uint8:
		clear(d)
	case []int8:
		clear(d)
	default:
		v := reflect.ValueOf(data)
		v.Slice(0, v.Len()).Clear()
	}
}

// keep stores a new plan, forgetting the oldest past maxPlans; a plan of
// the same signature stored by a concurrent run meanwhile wins.
func (g *Graph) keep(p *plan, inputs map[string]*value) {
	g.plans.mu.Lock()
	defer g.plans.mu.Unlock()
	for _, q := range g.plans.list {
		if q.matches(g, inputs) {
			return
		}
	}
	if len(g.plans.list) == maxPlans {
		g.plans.list = slices.Delete(g.plans.list, 0, 1)
	}
	g.plans.list = append(g.plans.list, p)
}

// retire sets a plan aside: a run found it did not hold.
func (g *Graph) retire(p *plan) {
	g.plans.mu.Lock()
	p.retired = true
	g.plans.mu.Unlock()
}

// shapeOf returns a copy of dims for the shape of the value about to be
// allocated: in a planned run the arena's, reused run after run, else a
// new slice.
func (rc *runCtx) shapeOf(dims []int) []int {
	if rc.plan == nil || rc.allocs >= len(rc.arena.shapes) {
		return slices.Clone(dims)
	}
	s := &rc.arena.shapes[rc.allocs]
	*s = append((*s)[:0], dims...)
	return *s
}

// staticPattern returns classify's pattern of the mask x, input arg of
// node n, for tq×tk scores. When x is a value the plan fixes for its
// signature (a constant, or a causal mask sliced from one), the pattern
// is the plan's, classified on the first run that needs it: walking a
// mask of T×T is a few percent of a pass.
func (rc *runCtx) staticPattern(n *node, arg int, x *value, keep bool, tq, tk int, classify func(rc *runCtx, x *value, keep bool, tq, tk int) maskPattern) maskPattern {
	p := rc.plan
	if p == nil || arg >= len(n.in) || n.in[arg] < 0 || p.env[n.in[arg]] != x {
		return classify(rc, x, keep, tq, tk)
	}
	key := staticMask{n: n, arg: arg, keep: keep, tq: tq, tk: tk}
	p.patternsMu.Lock()
	pattern, known := p.patterns[key]
	p.patternsMu.Unlock()
	if known {
		return pattern
	}
	pattern = classify(rc, x, keep, tq, tk)
	if rc.err() != nil {
		return pattern // cut short by the run's context: not the mask's pattern
	}
	p.patternsMu.Lock()
	if p.patterns == nil {
		p.patterns = map[staticMask]maskPattern{}
	}
	p.patterns[key] = pattern
	p.patternsMu.Unlock()
	return pattern
}
