package exec

import (
	"errors"
	"fmt"
	"slices"

	"github.com/attnrun/attnrun/internal/budget"
)

// Control flow: If, Loop and Scan run their GRAPH attributes, prepared by
// subgraph.go, which also appends the outer values the bodies read to the
// node's inputs after its declared ones. Every version up to maxOpset has
// the semantics implemented here: later versions only added element types
// (sequences and optionals among them, which the executor does not hold).
// Each iteration checks the run's context, and the values the ops build
// are allocated against the run's budget.
func init() {
	ops["If"] = &opSpec{since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: -1, run: ifOp, check: checkIf,
		attrs: map[string]attrKind{"then_branch": attrGraph, "else_branch": attrGraph}}
	// M and cond are optional inputs that may both be empty, so none is
	// required.
	ops["Loop"] = &opSpec{since: 1, minIn: 0, maxIn: -1, minOut: 1, maxOut: -1, run: loopOp, check: checkLoop,
		attrs: map[string]attrKind{"body": attrGraph}}
	// Scan-8 reads an optional sequence_lens first and scans along axis 1
	// of batched inputs; Scan-9 dropped the batch and added the axes and
	// directions of each scanned input and output.
	ops["Scan"] = &opSpec{since: 8, minIn: 0, maxIn: -1, minOut: 1, maxOut: -1, run: scanOp, check: checkScan,
		attrs: map[string]attrKind{"body": attrGraph, "num_scan_inputs": attrInt, "directions": attrInts,
			"scan_input_axes": attrInts, "scan_input_directions": attrInts,
			"scan_output_axes": attrInts, "scan_output_directions": attrInts}}
}

// declaredInputs returns how many of a node's inputs the node lists
// itself: the outer values its bodies capture come after them.
func declaredInputs(n *node) int {
	first := len(n.in)
	for _, a := range n.attrs {
		if a.g != nil {
			for _, c := range a.g.captures {
				first = min(first, c.arg)
			}
		}
	}
	return first
}

// body returns a GRAPH attribute the op requires.
func body(n *node, name string) (*subgraph, error) {
	g := n.attrGraph(name)
	if g == nil {
		return nil, fmt.Errorf("needs attribute %q (a graph)", name)
	}
	return g, nil
}

// checkArity checks a body's declared inputs and outputs.
func checkArity(g *subgraph, ins, outs int) error {
	if len(g.g.inputs) != ins || len(g.g.outputs) != outs {
		return fmt.Errorf("attribute %q has %d inputs and %d outputs; the node needs %d and %d",
			g.name, len(g.g.inputs), len(g.g.outputs), ins, outs)
	}
	return nil
}

// checkIf checks that both branches exist, take no inputs and give the
// node's outputs.
func checkIf(n *node) error {
	for _, name := range []string{"then_branch", "else_branch"} {
		g, err := body(n, name)
		if err != nil {
			return err
		}
		if err := checkArity(g, 0, len(n.out)); err != nil {
			return err
		}
	}
	return nil
}

// ifOp is the kernel of If: it runs one branch, chosen by a one-element
// bool condition, and returns its outputs.
func ifOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	cond, err := singleBool(in[0], "cond")
	if err != nil {
		return nil, err
	}
	branch := n.attrGraph("else_branch")
	if cond {
		branch = n.attrGraph("then_branch")
	}
	return branch.call(rc, nil, in)
}

// singleBool reads a one-element bool tensor.
func singleBool(v *value, what string) (bool, error) {
	if v.dtype != Bool || v.size() != 1 {
		return false, fmt.Errorf("%s must be a one-element bool tensor, is %s", what, v.describe())
	}
	return v.data.([]bool)[0], nil
}

// checkLoop checks the body against the node: inputs (iteration number,
// condition, the N carried values), outputs (condition, the N carried
// values, then the K scan outputs, K = the node's outputs - N).
func checkLoop(n *node) error {
	g, err := body(n, "body")
	if err != nil {
		return err
	}
	carried := max(declaredInputs(n)-2, 0)
	if len(n.out) < carried {
		return fmt.Errorf("has %d loop-carried values but only %d outputs", carried, len(n.out))
	}
	return checkArity(g, 2+carried, 1+len(n.out))
}

// loopOp is the kernel of Loop: it runs while the iteration number is
// below the optional trip count M and the condition holds, which is the
// optional cond input at first and then the body's condition output.
// ONNX's table says that output is ignored when the node has no cond
// input; ONNX Runtime and ONNX's reference implementation stop on it all
// the same, and so does the executor, to give their numbers. With neither
// M nor a false condition the loop runs until the run's context ends it.
// Carried values may change shape between iterations; each scan output
// stacks its per-iteration values along a new first axis, and they must
// keep one shape.
func loopOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	body := n.attrGraph("body")
	args := in[:declaredInputs(n)]
	trips, bounded := int64(0), false
	if m := input(args, 0); m != nil {
		ms, err := ints(rc, n, m)
		if err != nil || len(ms) != 1 {
			return nil, fmt.Errorf("input M must be a one-element int64 tensor, is %s", m.describe())
		}
		trips, bounded = ms[0], true
	}
	cond := true
	if c := input(args, 1); c != nil {
		var err error
		if cond, err = singleBool(c, "cond"); err != nil {
			return nil, err
		}
	}
	carried := slices.Clone(args[min(2, len(args)):])
	scans := make([][]*value, len(n.out)-len(carried))
	held := newHold(rc)
	defer held.release()
	for i := int64(0); (!bounded || i < trips) && cond; i++ {
		if err := rc.ctx.Err(); err != nil {
			return nil, fmt.Errorf("iteration %d: %w", i, err)
		}
		outs, err := body.call(rc, append([]*value{scalarOf(i), scalarOf(cond)}, carried...), in)
		if err != nil {
			return nil, fmt.Errorf("iteration %d: %w", i, err)
		}
		if cond, err = singleBool(outs[0], "the body's condition output"); err != nil {
			return nil, fmt.Errorf("iteration %d: %w", i, err)
		}
		copy(carried, outs[1:1+len(carried)])
		for k, v := range outs[1+len(carried):] {
			if len(scans[k]) > 0 && !equalShapes(v.shape, scans[k][0].shape) {
				return nil, fmt.Errorf("iteration %d: scan output %d has shape %s, earlier iterations %s", i, k, shapeString(v.shape), shapeString(scans[k][0].shape))
			}
			if err := held.add(n, v); err != nil {
				return nil, err
			}
			scans[k] = append(scans[k], v)
		}
	}
	outs := carried
	for k, vs := range scans {
		out, err := stack(rc, n, vs, body.g.outputs[1+len(carried)+k])
		if err != nil {
			return nil, fmt.Errorf("scan output %d: %w", k, err)
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// hold counts the bytes of the per-iteration values a Loop keeps for its
// scan outputs against the run's budget, so that a long loop fails with a
// budget error rather than exhausting memory.
type hold struct {
	rc    *runCtx
	bytes int64
}

// newHold returns an empty hold.
func newHold(rc *runCtx) *hold { return &hold{rc: rc} }

// add reserves the bytes of v. The hold keeps a single reservation of
// its total, so that even without a shared budget (nil: the default limit
// per reservation) the total is what is checked.
func (h *hold) add(n *node, v *value) error {
	total := h.bytes + budget.Bytes(int64(v.size()), v.dtype.size())
	h.release()
	h.bytes = 0
	if err := h.rc.budget.Reserve(total, fmt.Sprintf("node %s (%s): the scan outputs kept so far", n.label(), n.op)); err != nil {
		return err
	}
	h.bytes = total
	return nil
}

// release returns every reserved byte.
func (h *hold) release() { h.rc.budget.Release(h.bytes) }

// stack stacks equally shaped values along a new first axis; with no
// values, the shape comes from the body's declaration of the output,
// which must then be fully known.
func stack(rc *runCtx, n *node, vs []*value, decl TensorInfo) (*value, error) {
	if len(vs) == 0 {
		return emptyStack(decl, 0)
	}
	elem := vs[0].shape
	out, err := rc.alloc(n, vs[0].dtype, append([]int{len(vs)}, elem...))
	if err != nil {
		return nil, err
	}
	size := numel(elem)
	for i, v := range vs {
		copyView(out.data, view{offset: i * size, strides: stridesOf(elem)}, v.data, contiguous(elem), elem)
	}
	return out, nil
}

// emptyStack is the scan output of a loop that ran no iteration: zero
// elements along axis (in [-r-1, r] for the body's rank-r elements), in
// the element type and shape the body declares.
func emptyStack(decl TensorInfo, axis int64) (*value, error) {
	shape, err := declaredShape(decl)
	if err != nil {
		return nil, err
	}
	a, err := normalizeAxis(int(axis), len(shape)+1)
	if err != nil {
		return nil, err
	}
	return newValue(decl.DType, slices.Insert(shape, a, 0)), nil
}

// declaredShape is the fixed shape a body declares for an output, which
// is all there is to go by when no iteration produced it.
func declaredShape(decl TensorInfo) ([]int, error) {
	if decl.DType == 0 || decl.Shape == nil {
		return nil, fmt.Errorf("no iteration ran, and the body does not declare the type and shape of %q", decl.Name)
	}
	shape := make([]int, 0, len(decl.Shape))
	for _, d := range decl.Shape {
		if !d.Known {
			return nil, fmt.Errorf("no iteration ran, and the body declares %s without a fixed shape", decl)
		}
		shape = append(shape, int(d.Value))
	}
	return shape, nil
}

// scanPlan is what a Scan node's attributes say: N state variables, M
// scanned inputs and K scan outputs, with their axes and directions.
type scanPlan struct {
	states, inputs, outputs int
	inAxes, inReverse       []int64
	outAxes, outReverse     []int64
}

// planScan reads and checks a Scan node's attributes for its opset.
func planScan(n *node) (scanPlan, error) {
	m := int(n.attrInt("num_scan_inputs", 0))
	declared := declaredInputs(n)
	if n.opset < 9 {
		declared-- // sequence_lens
	}
	p := scanPlan{inputs: m, states: declared - m}
	p.outputs = len(n.out) - p.states
	switch {
	case !n.has("num_scan_inputs") || m < 1:
		return p, errors.New("needs attribute num_scan_inputs of at least 1")
	case p.states < 0:
		return p, fmt.Errorf("has %d inputs for %d scanned ones", declared, m)
	case p.outputs < 0:
		return p, fmt.Errorf("has %d outputs for %d state variables", len(n.out), p.states)
	}
	version9 := []string{"scan_input_axes", "scan_input_directions", "scan_output_axes", "scan_output_directions"}
	if n.opset < 9 {
		for _, name := range version9 {
			if n.has(name) {
				return p, fmt.Errorf("has attribute %q, which Scan defines from opset 9 on", name)
			}
		}
		p.inReverse, _ = n.attrInts("directions")
		return p, checkFlags("directions", p.inReverse, m)
	}
	if n.has("directions") {
		return p, errors.New(`has attribute "directions", which Scan replaced by scan_input_directions at opset 9`)
	}
	p.inAxes, _ = n.attrInts("scan_input_axes")
	p.inReverse, _ = n.attrInts("scan_input_directions")
	p.outAxes, _ = n.attrInts("scan_output_axes")
	p.outReverse, _ = n.attrInts("scan_output_directions")
	for _, c := range []struct {
		name  string
		v     []int64
		count int
		flags bool
	}{
		{"scan_input_axes", p.inAxes, m, false}, {"scan_input_directions", p.inReverse, m, true},
		{"scan_output_axes", p.outAxes, p.outputs, false}, {"scan_output_directions", p.outReverse, p.outputs, true},
	} {
		if c.v != nil && len(c.v) != c.count {
			return p, fmt.Errorf("attribute %q has %d entries for %d values", c.name, len(c.v), c.count)
		}
		if c.flags {
			if err := checkFlags(c.name, c.v, c.count); err != nil {
				return p, err
			}
		}
	}
	return p, nil
}

// checkFlags checks a list of directions: absent, or count entries of 0
// (forward) or 1 (reverse).
func checkFlags(name string, v []int64, count int) error {
	if v == nil {
		return nil
	}
	if len(v) != count {
		return fmt.Errorf("attribute %q has %d entries for %d values", name, len(v), count)
	}
	for _, d := range v {
		if d != 0 && d != 1 {
			return fmt.Errorf("attribute %q holds %d; directions are 0 (forward) or 1 (reverse)", name, d)
		}
	}
	return nil
}

// at returns entry i of an optional per-value attribute, or 0.
func at(v []int64, i int) int64 {
	if v == nil {
		return 0
	}
	return v[i]
}

// checkScan checks the attributes and the body: N + M inputs, N + K
// outputs.
func checkScan(n *node) error {
	g, err := body(n, "body")
	if err != nil {
		return err
	}
	p, err := planScan(n)
	if err != nil {
		return err
	}
	return checkArity(g, p.states+p.inputs, p.states+p.outputs)
}

// scanOp is the kernel of Scan.
func scanOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	p, err := planScan(n)
	if err != nil {
		return nil, err
	}
	args := in[:declaredInputs(n)]
	if n.opset < 9 {
		return scanBatched(rc, n, p, args[0], args[1:1+p.states], args[1+p.states:], in)
	}
	return scan(rc, n, p, args[:p.states], args[p.states:], in)
}

// scan runs Scan-9 and later on one sequence: the body sees the states
// and element t of each scanned input (counted from the end for a
// reversed input), and each scan output gathers the body's elements along
// its axis, appended or, reversed, prepended.
func scan(rc *runCtx, n *node, p scanPlan, states, inputs, in []*value) ([]*value, error) {
	axes := make([]int, len(inputs))
	steps := -1
	for j, x := range inputs {
		a, err := normalizeAxis(int(at(p.inAxes, j)), x.rank())
		if err != nil {
			return nil, fmt.Errorf("scanned input %d: scan_input_axes: %w", j, err)
		}
		axes[j] = a
		if steps >= 0 && x.shape[a] != steps {
			return nil, fmt.Errorf("scanned input %d has %d steps along axis %d; scanned input 0 has %d", j, x.shape[a], a, steps)
		}
		steps = x.shape[a]
	}
	body := n.attrGraph("body")
	states = slices.Clone(states)
	outs := make([]*value, p.outputs)
	outAxes := make([]int, p.outputs)
	for t := range steps {
		if err := rc.ctx.Err(); err != nil {
			return nil, fmt.Errorf("iteration %d: %w", t, err)
		}
		args := slices.Clone(states)
		for j, x := range inputs {
			e, err := slab(rc, n, x, axes[j], step(t, steps, at(p.inReverse, j)))
			if err != nil {
				return nil, err
			}
			args = append(args, e)
		}
		res, err := body.call(rc, args, in)
		if err != nil {
			return nil, fmt.Errorf("iteration %d: %w", t, err)
		}
		copy(states, res[:p.states])
		for k, e := range res[p.states:] {
			if outs[k] == nil {
				a, err := normalizeAxis(int(at(p.outAxes, k)), e.rank()+1)
				if err != nil {
					return nil, fmt.Errorf("scan output %d: scan_output_axes: %w", k, err)
				}
				outAxes[k] = a
				if outs[k], err = rc.alloc(n, e.dtype, slices.Insert(slices.Clone(e.shape), a, steps)); err != nil {
					return nil, err
				}
			}
			if err := place(outs[k], outAxes[k], step(t, steps, at(p.outReverse, k)), e); err != nil {
				return nil, fmt.Errorf("iteration %d: scan output %d: %w", t, k, err)
			}
		}
	}
	for k := range outs {
		if outs[k] != nil {
			continue
		}
		var err error
		if outs[k], err = emptyStack(body.g.outputs[p.states+k], at(p.outAxes, k)); err != nil {
			return nil, fmt.Errorf("scan output %d: %w", k, err)
		}
	}
	return append(states, outs...), nil
}

// step is the position of iteration t of steps, counted from the end when
// reverse is 1.
func step(t, steps int, reverse int64) int {
	if reverse == 1 {
		return steps - 1 - t
	}
	return t
}

// slab returns the sub-tensor of x at index i along axis, as a new value.
func slab(rc *runCtx, n *node, x *value, axis, i int) (*value, error) {
	shape := slices.Delete(slices.Clone(x.shape), axis, axis+1)
	strides := stridesOf(x.shape)
	out, err := rc.alloc(n, x.dtype, shape)
	if err != nil {
		return nil, err
	}
	offset := i * strides[axis]
	src := view{offset: offset, strides: slices.Delete(strides, axis, axis+1)}
	copyView(out.data, contiguous(shape), x.data, src, shape)
	return out, nil
}

// place writes e at index i along axis of out, whose other dimensions
// must be e's.
func place(out *value, axis, i int, e *value) error {
	want := slices.Delete(slices.Clone(out.shape), axis, axis+1)
	if e.dtype != out.dtype || !equalShapes(e.shape, want) {
		return fmt.Errorf("is %s, earlier iterations %s %s", e.describe(), out.dtype, shapeString(want))
	}
	strides := stridesOf(out.shape)
	offset := i * strides[axis]
	dst := view{offset: offset, strides: slices.Delete(strides, axis, axis+1)}
	copyView(out.data, dst, e.data, contiguous(e.shape), e.shape)
	return nil
}

// scanBatched runs Scan-8: every state and scanned input has a batch axis
// 0, scanned inputs have their sequence along axis 1, and each batch
// entry is scanned on its own for sequence_lens[b] steps (all of them
// without sequence_lens). A reversed input is read backwards within its
// length. Scan outputs are zero past an entry's length (ONNX leaves those
// values undefined).
func scanBatched(rc *runCtx, n *node, p scanPlan, lens *value, states, inputs, in []*value) ([]*value, error) {
	if len(inputs) == 0 {
		return nil, errors.New("has no scanned input")
	}
	batch, steps := -1, -1
	for j, x := range slices.Concat(states, inputs) {
		if x.rank() < 1 || j >= len(states) && x.rank() < 2 {
			return nil, fmt.Errorf("input %d (%s) lacks the batch or sequence axis", j, x.describe())
		}
		if batch >= 0 && x.shape[0] != batch {
			return nil, fmt.Errorf("input %d has batch size %d, others %d", j, x.shape[0], batch)
		}
		batch = x.shape[0]
		if j >= len(states) {
			if steps >= 0 && x.shape[1] != steps {
				return nil, fmt.Errorf("scanned inputs have %d and %d steps", steps, x.shape[1])
			}
			steps = x.shape[1]
		}
	}
	var lengths []int64
	if lens != nil {
		var err error
		if lengths, err = ints(rc, n, lens); err != nil || len(lengths) != batch {
			return nil, fmt.Errorf("sequence_lens must be %d int64 values, is %s", batch, lens.describe())
		}
	}
	body := n.attrGraph("body")
	outs := make([]*value, len(states)+p.outputs)
	for b := range batch {
		length := steps
		if lengths != nil {
			if lengths[b] < 0 || lengths[b] > int64(steps) {
				return nil, fmt.Errorf("sequence_lens[%d] is %d, outside [0, %d]", b, lengths[b], steps)
			}
			length = int(lengths[b])
		}
		st := make([]*value, len(states))
		for i, s := range states {
			var err error
			if st[i], err = slab(rc, n, s, 0, b); err != nil {
				return nil, err
			}
		}
		for t := range length {
			if err := rc.ctx.Err(); err != nil {
				return nil, fmt.Errorf("batch %d, iteration %d: %w", b, t, err)
			}
			args := slices.Clone(st)
			for j, x := range inputs {
				row, err := slab(rc, n, x, 0, b)
				if err != nil {
					return nil, err
				}
				e, err := slab(rc, n, row, 0, step(t, length, at(p.inReverse, j)))
				if err != nil {
					return nil, err
				}
				args = append(args, e)
			}
			res, err := body.call(rc, args, in)
			if err != nil {
				return nil, fmt.Errorf("batch %d, iteration %d: %w", b, t, err)
			}
			copy(st, res[:len(st)])
			for k, e := range res[len(st):] {
				o := &outs[len(st)+k]
				if *o == nil {
					if *o, err = rc.alloc(n, e.dtype, append([]int{batch, steps}, e.shape...)); err != nil {
						return nil, err
					}
				}
				rows := (*o).withShape(append([]int{batch * steps}, e.shape...))
				if err := place(rows, 0, b*steps+t, e); err != nil {
					return nil, fmt.Errorf("batch %d, iteration %d: scan output %d: %w", b, t, k, err)
				}
			}
		}
		for i, s := range st {
			o := &outs[i]
			if *o == nil {
				var err error
				if *o, err = rc.alloc(n, s.dtype, append([]int{batch}, s.shape...)); err != nil {
					return nil, err
				}
			}
			if err := place(*o, 0, b, s); err != nil {
				return nil, fmt.Errorf("batch %d: state %d: %w", b, i, err)
			}
		}
	}
	for i, s := range states { // no batch entry: nothing to slice
		if outs[i] == nil {
			outs[i] = newValue(s.dtype, s.shape)
		}
	}
	for k := range p.outputs { // no iteration in any batch entry
		o := &outs[len(states)+k]
		if *o == nil {
			shape, err := declaredShape(body.g.outputs[len(states)+k])
			if err != nil {
				return nil, fmt.Errorf("scan output %d: %w", k, err)
			}
			if *o, err = rc.alloc(n, body.g.outputs[len(states)+k].DType, append([]int{batch, steps}, shape...)); err != nil {
				return nil, err
			}
		}
	}
	return outs, nil
}
