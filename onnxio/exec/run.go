package exec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/budget"
)

// Run is RunContext with context.Background: no deadline.
func (g *Graph) Run(inputs map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	return g.RunContext(context.Background(), inputs)
}

// RunContext executes the graph on the named inputs and returns every
// graph output by name. Each input must match its declaration: element
// type, rank, fixed dimensions, and one size per symbolic dimension across
// all inputs. A *tensor.Dense has no float16, bfloat16, float8 or 4-bit
// types: a float32 Dense is accepted for an input of those float types and
// rounded to it, an int8 or uint8 one for the integers, and such outputs
// come back in those types (exactly). Inputs are not modified and the
// outputs share no memory with them or with the graph.
//
// *tensor.Dense cannot hold zero elements, so an output with none is an
// error here; RunArrays returns it (and takes empty inputs).
//
// The run checks ctx between nodes and inside long kernels (products,
// attention) and returns ctx.Err() (wrapped) once ctx is done. The values
// it holds at once are bounded by Options.MaxMemory: a tensor that would
// exceed the budget is an error matching budget.ErrExceeded, naming the
// node, op, shape and bytes. RunContext never panics: a failure inside an
// op comes back as an error naming the node.
func (g *Graph) RunContext(ctx context.Context, inputs map[string]*tensor.Dense) (map[string]*tensor.Dense, error) {
	values := make(map[string]*value, len(inputs))
	for name, t := range inputs {
		v, err := fromDense(t)
		if err == nil {
			v, err = g.asDeclared(name, v)
		}
		if err != nil {
			return nil, fmt.Errorf("exec: input %q: %w", name, err)
		}
		values[name] = v
	}
	outs, err := g.runOwned(ctx, values, false)
	if err != nil {
		return nil, err
	}
	res := make(map[string]*tensor.Dense, len(outs))
	for i, info := range g.outputs {
		v := outs[i]
		if v.size() == 0 {
			return nil, fmt.Errorf("exec: output %q: %w", info.Name, errEmptyDense(v))
		}
		res[info.Name] = wrapDense(v.shape, v.data)
	}
	return res, nil
}

// RunArrays executes the graph as RunContext does, on inputs and outputs
// of attnrun's own value type: tensors of zero elements (a KV cache of
// past length 0, an empty Slice) and float16 or bfloat16 values (held as
// float32, see package array) pass both ways. Each output keeps the
// element type the graph computes for it, which is its declared type.
// Inputs of a narrow float type holding values their type cannot
// represent are rounded (in a copy), and as in RunContext an input of a
// narrow type may be given in its storage type (float32 for float16). The
// outputs share no memory with the inputs or with the graph.
func (g *Graph) RunArrays(ctx context.Context, inputs map[string]*array.Array) (map[string]*array.Array, error) {
	values := make(map[string]*value, len(inputs))
	for name, a := range inputs {
		v, err := fromArray(a)
		if err == nil {
			v, err = g.asDeclared(name, v)
		}
		if err != nil {
			return nil, fmt.Errorf("exec: input %q: %w", name, err)
		}
		values[name] = v
	}
	outs, err := g.runOwned(ctx, values, true)
	if err != nil {
		return nil, err
	}
	res := make(map[string]*array.Array, len(outs))
	for i, info := range g.outputs {
		res[info.Name] = outs[i].toArray()
	}
	return res, nil
}

// runOwned executes the graph with a budget of its own and returns the
// outputs in declaration order, each with data the caller may keep and
// write: a block the run made and nothing else holds is handed over,
// anything else (an input, a constant, a block another output has, a
// buffer of a plan's arena) copied.
//
// A run whose input shapes have a plan follows it (plan.go); the first
// run of a signature records one. The outputs' shapes may then be the
// plan's, valid until the next run: keep asks for copies, for callers
// that hand them on (data is the caller's either way).
func (g *Graph) runOwned(ctx context.Context, values map[string]*value, keep bool) ([]*value, error) {
	p, rec := g.planFor(values)
	var rc *runCtx
	if p != nil {
		a := p.getArena(len(g.nodes))
		defer p.putArena(a)
		rc = a.runCtx(ctx, p)
	} else {
		rc = newRunCtx(ctx, budget.New(g.maxMemory))
		rc.rec = rec
	}
	outs, err := g.execute(rc, values)
	if errors.Is(err, errPlanMiss) {
		g.retire(p)
		rc = newRunCtx(ctx, budget.New(g.maxMemory))
		outs, err = g.execute(rc, values)
	}
	if err != nil {
		return nil, err
	}
	if rec != nil {
		g.keep(rec.build(g, values), values)
	}
	var handed []*block // blocks already given to the caller
	for i, v := range outs {
		if v.mem != nil && !v.mem.arena && !slices.Contains(handed, v.mem) {
			handed = append(handed, v.mem)
			if p != nil { // the struct is the arena's, and its shape may be
				shape := v.shape
				if keep {
					shape = slices.Clone(shape)
				}
				outs[i] = &value{dtype: v.dtype, shape: shape, data: v.data}
			}
			continue
		}
		bytes := budget.Bytes(int64(v.size()), v.dtype.size())
		if _, err := rc.take(bytes, func() string { return v.describe() }); err != nil {
			return nil, fmt.Errorf("exec: output %q: %w", g.outputs[i].Name, err)
		}
		outs[i] = &value{dtype: v.dtype, shape: slices.Clone(v.shape), data: cloneData(v.data)}
	}
	return outs, nil
}

// asDeclared takes a value of a narrow type's storage type given for an
// input declared of that type as a value of it: float32 for float16 or
// bfloat16 (rounded to it), int8 for int4 (which must be in its range);
// *tensor.Dense has no such types. Other values pass unchanged, to be
// checked when bound.
func (g *Graph) asDeclared(name string, v *value) (*value, error) {
	i := slices.IndexFunc(g.inputs, func(t TensorInfo) bool { return t.Name == name })
	if i < 0 || v.dtype == g.inputs[i].DType || v.dtype != wideOf(g.inputs[i].DType) {
		return v, nil
	}
	return fromArray(v.withDType(g.inputs[i].DType).toArray())
}

// run executes the graph on values without a deadline; it is Run without
// the conversions to and from *tensor.Dense, which tests use.
func (g *Graph) run(inputs map[string]*value) ([]*value, error) {
	return g.runContext(context.Background(), inputs)
}

// runContext executes the graph on values, with a budget of its own, and
// returns the outputs in declaration order.
func (g *Graph) runContext(ctx context.Context, inputs map[string]*value) ([]*value, error) {
	return g.execute(newRunCtx(ctx, budget.New(g.maxMemory)), inputs)
}

// errPlanMiss stops a planned run whose plan does not hold for its
// inputs; runOwned runs the graph again node by node.
var errPlanMiss = errors.New("exec: the run's plan does not hold")

// execute runs the nodes in order with run context rc, following rc.plan
// when it has one.
func (g *Graph) execute(rc *runCtx, inputs map[string]*value) (outs []*value, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("exec: internal error: %v", r)
		}
	}()
	rc.weights = g.weights
	var env []*value
	if rc.plan != nil {
		env = rc.arena.env
		copy(env, rc.plan.env)
	} else {
		env = slices.Clone(g.consts)
	}
	if err := g.bindInputs(env, inputs); err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	for p, n := range g.nodes {
		rc.pos = p
		if err := rc.err(); err != nil {
			return nil, fmt.Errorf("exec: stopped before node %s (%s): %w", n.label(), n.op, err)
		}
		if rc.plan != nil {
			done, err := rc.planned(p, n, env)
			if err != nil {
				return nil, err
			}
			if done {
				continue
			}
		}
		if err := runStep(rc, n, env, p); err != nil {
			return nil, fmt.Errorf("exec: %w", err)
		}
	}
	outs = make([]*value, len(g.outSlots))
	for i, s := range g.outSlots {
		outs[i] = env[s]
	}
	return outs, nil
}

// planned does what the plan says at node n (position p) and reports
// whether that was all; errPlanMiss when a check fails.
func (rc *runCtx) planned(p int, n *node, env []*value) (bool, error) {
	st := &rc.plan.steps[p]
	switch st.kind {
	case stepSkip:
		return true, nil
	case stepCheck:
		if in := env[n.in[0]]; in == nil || !equalShapes(in.shape, st.inShape) {
			return false, errPlanMiss
		}
	case stepView:
		in := env[n.in[0]]
		if in == nil || !equalShapes(in.shape, st.inShape) {
			return false, errPlanMiss
		}
		v := &rc.arena.steps[p]
		*v = value{dtype: in.dtype, shape: st.shape, data: in.data, mem: in.mem}
		env[n.out[0]] = v
		rc.hold(v)
	default:
		return false, nil
	}
	for _, s := range n.free {
		rc.drop(env[s])
		env[s] = nil
	}
	rc.settle()
	return true, nil
}

// runNode runs one node on the environment: it gathers the inputs, turns a
// panic in the op into an error naming the node, stores the outputs, drops
// the values this node was the last to read and releases the memory no
// value holds any more.
func runNode(rc *runCtx, n *node, env []*value) error { return runStep(rc, n, env, -1) }

// runStep is runNode for the node at position pos of the graph's order,
// which a recording run notes; pos is -1 for a subgraph's nodes.
func runStep(rc *runCtx, n *node, env []*value, pos int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("node %s (%s): internal error: %v", n.label(), n.op, r)
		}
	}()
	base := len(rc.args)
	rc.args = slices.Grow(rc.args, len(n.in))[:base+len(n.in)]
	in := rc.args[base:]
	defer func() {
		clear(in)
		rc.args = rc.args[:base]
	}()
	for k, s := range n.in {
		in[k] = nil
		if s >= 0 {
			in[k] = env[s]
		}
	}
	args, narrowType := narrowInputs(n, in)
	outs, err := n.spec.run(rc, n, args)
	if err != nil {
		return fmt.Errorf("node %s (%s): %w", n.label(), n.op, err)
	}
	if len(outs) < len(n.out) {
		return fmt.Errorf("node %s (%s): produced %d outputs, the node has %d", n.label(), n.op, len(outs), len(n.out))
	}
	narrowOutputs(n, narrowType, in, outs)
	if pos >= 0 && rc.rec != nil {
		rc.rec.node(pos, n, in, outs)
	}
	for k, s := range n.out {
		if s >= 0 {
			env[s] = outs[k]
			rc.hold(outs[k])
		}
	}
	for _, s := range n.free {
		rc.drop(env[s])
		env[s] = nil
	}
	rc.settle()
	return nil
}

// bindInputs checks the caller's inputs against the declarations and puts
// them into env.
func (g *Graph) bindInputs(env []*value, inputs map[string]*value) error {
	for name := range inputs {
		if !slices.ContainsFunc(g.inputs, func(t TensorInfo) bool { return t.Name == name }) {
			if _, ok := g.defaults[name]; !ok {
				return fmt.Errorf("unknown input %q; the graph's inputs are %s", name, g.inputNames())
			}
		}
	}
	for name, s := range g.defaults {
		if v, ok := inputs[name]; ok {
			if v.dtype != env[s].dtype {
				return fmt.Errorf("input %q: dtype %s, the graph declares %s", name, v.dtype, env[s].dtype)
			}
			env[s] = v
		}
	}
	sizes := map[string]int{} // symbolic dimension: size bound by an earlier input
	bound := map[string]string{}
	for i, info := range g.inputs {
		v, ok := inputs[info.Name]
		if !ok {
			return fmt.Errorf("missing input %q (%s)", info.Name, info)
		}
		if v.dtype != info.DType {
			return fmt.Errorf("input %q: dtype %s, the graph declares %s", info.Name, v.dtype, info)
		}
		if err := checkShape(info, v.shape, sizes, bound); err != nil {
			return fmt.Errorf("input %q: %w", info.Name, err)
		}
		env[g.inSlots[i]] = v
	}
	return nil
}

// checkShape matches a shape against a declaration; symbolic dimensions
// bind to the first size seen and must keep it across inputs.
func checkShape(info TensorInfo, shape []int, sizes map[string]int, bound map[string]string) error {
	if info.Shape == nil {
		return nil
	}
	if len(shape) != len(info.Shape) {
		return fmt.Errorf("shape %s has rank %d, the graph declares %s (rank %d)", shapeString(shape), len(shape), info, len(info.Shape))
	}
	for i, d := range info.Shape {
		switch {
		case d.Known && int64(shape[i]) != d.Value:
			return fmt.Errorf("shape %s: dimension %d is %d, the graph declares %s", shapeString(shape), i, shape[i], info)
		case !d.Known && d.Param != "":
			if want, ok := sizes[d.Param]; ok && want != shape[i] {
				return fmt.Errorf("shape %s: dimension %d (%s) is %d, but %s is %d in input %q", shapeString(shape), i, d.Param, shape[i], d.Param, want, bound[d.Param])
			}
			sizes[d.Param], bound[d.Param] = shape[i], info.Name
		}
	}
	return nil
}

// inputNames lists the declared inputs for errors.
func (g *Graph) inputNames() string {
	names := make([]string, len(g.inputs))
	for i, t := range g.inputs {
		names[i] = fmt.Sprintf("%q", t.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
