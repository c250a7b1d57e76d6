package layers

import (
	"math"
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// groupView follows a fused projection viewed as (B, T, G, d), G groups of
// d features, through the ops that pick heads out of it: axes holds, for
// each axis of the value, the axis of the view it came from (0 B, 1 T, 2 G,
// 3 d, and stackAxis), and groups the groups along the G axis, in order.
// A projection viewed as (B, T, S, H, d), S projections of H heads stacked
// (ModernBERT's Wqkv), is G = S·H groups with the stack axis before G:
// picking one projection there leaves its H groups.
type groupView struct {
	l      *match.Linear
	d      int
	axes   []int
	groups []int
	picked bool // a Slice, Gather, GatherND or Split chose groups
	// stacks is S while the stack axis holds S projections (groups
	// holds them all, one after the other), 1 once one is picked, 0
	// without a stack axis.
	stacks int
}

// stackAxis labels the stack axis S of a (B, T, S, H, d) view in
// groupView.axes.
const stackAxis = 4

// viewedHeads reads heads (B, H, T, d) picked out of a fused projection
// viewed as (B, T, G, d) by any of Slice, Gather, GatherND and Split on the
// groups axis, with Transposes between them, as Falcon splits its
// multi-query query_key_value (queries sliced from G = H+2 groups, the key
// and the value gathered from a transposed view). The projection returned
// holds the picked groups' rows, in head order.
func viewedHeads(g match.Graph, heads string) (*match.Linear, int, int, bool) {
	v, ok := viewGroups(g, heads, 0)
	if !ok || !v.picked || v.stacks > 1 || !slices.Equal(v.axes, []int{0, 2, 1, 3}) {
		return nil, 0, 0, false
	}
	var rows []int
	var blocks [][2]int
	for _, gr := range v.groups {
		lo := gr * v.d
		blocks = append(blocks, [2]int{lo, lo + v.d})
		for j := range v.d {
			rows = append(rows, lo+j)
		}
	}
	sub, err := linearRows(v.l, rows)
	if err != nil || v.l.Blocks != nil {
		return nil, 0, 0, false
	}
	sub.Blocks = blocks
	return sub, len(v.groups), v.d, true
}

// viewGroups walks back from v to the (B, T, G, d) view of a projection.
func viewGroups(g match.Graph, v string, depth int) (*groupView, bool) {
	n := g.Producer(v)
	if n == nil || depth > 8 {
		return nil, false
	}
	ins := n.Inputs()
	switch n.Op() {
	case "Identity":
		return viewGroups(g, ins[0], depth+1)
	case "Reshape":
		return projectionView(g, n)
	}
	in, ok := viewGroups(g, ins[0], depth+1)
	if !ok {
		return nil, false
	}
	gAxis := slices.Index(in.axes, 2)
	if sAxis := slices.Index(in.axes, stackAxis); sAxis >= 0 {
		if picked, ok := stackPicked(g, n, v, in, sAxis); ok || picked {
			return in, ok
		}
		if in.stacks > 1 && n.Op() != "Transpose" {
			return nil, false // groups picked across the projections: not heads of one
		}
	}
	switch n.Op() {
	case "Transpose":
		perm := n.Ints("perm")
		if len(perm) != len(in.axes) {
			return nil, false
		}
		axes := make([]int, len(perm))
		for i, p := range perm {
			if p < 0 || int(p) >= len(in.axes) {
				return nil, false
			}
			axes[i] = in.axes[p]
		}
		in.axes = axes
		return in, true
	case "Slice":
		return slicedGroups(g, n, in, gAxis)
	case "Gather":
		idx, ok := constInts(g, ins[1])
		t, err := g.Constant(ins[1])
		if !ok || err != nil || t.Dims() != 1 || normAxis(n.Int("axis", 0), len(in.axes)) != gAxis {
			return nil, false
		}
		return pickGroups(in, idx)
	case "GatherND":
		// indices (m, 1) pick m entries of the first axis, which must be G.
		idx, ok := constInts(g, ins[1])
		t, err := g.Constant(ins[1])
		if !ok || err != nil || n.Int("batch_dims", 0) != 0 || gAxis != 0 || t.Dims() != 2 || t.Shape()[1] != 1 {
			return nil, false
		}
		return pickGroups(in, idx)
	case "Split":
		return splitGroups(g, n, v, in, gAxis)
	}
	return nil, false
}

// projectionView reads the Reshape n of an nn.Linear's output to (B, T,
// G, d) or (B, T, S, H, d).
func projectionView(g match.Graph, n *match.Node) (*groupView, bool) {
	shape, err := g.Shape(n.Output())
	if err != nil || len(shape) != 4 && len(shape) != 5 {
		return nil, false
	}
	features := 1
	for _, n := range shape[2:] {
		features *= n
	}
	l, ok := g.Linear(n.Inputs()[0])
	if !ok || l.Out != features {
		return nil, false
	}
	v := &groupView{l: l, d: shape[len(shape)-1], axes: []int{0, 1, 2, 3}}
	if len(shape) == 5 {
		v.axes, v.stacks = []int{0, 1, stackAxis, 2, 3}, shape[2]
	}
	v.groups = make([]int, l.Out/v.d)
	for i := range v.groups {
		v.groups[i] = i
	}
	return v, true
}

// stackPicked applies n to a view whose stack axis is sAxis, when n works
// on that axis: picking one projection (a Slice of one, a Gather of one
// index, a Split into ones) keeps its groups, and a Squeeze then drops the
// axis. picked reports that n works on the stack axis; ok that it does so
// as a pick of one projection.
func stackPicked(g match.Graph, n *match.Node, v string, in *groupView, sAxis int) (picked, ok bool) {
	ins := n.Inputs()
	pick := func(i int) bool {
		if i < 0 {
			i += in.stacks
		}
		if in.stacks < 2 || i < 0 || i >= in.stacks || len(in.groups)%in.stacks != 0 {
			return false
		}
		h := len(in.groups) / in.stacks
		in.groups, in.stacks, in.picked = in.groups[i*h:(i+1)*h], 1, true
		return true
	}
	switch n.Op() {
	case "Slice":
		if len(ins) < 4 {
			return false, false
		}
		axis, ok := g.Scalar(ins[3])
		if !ok || normAxis(int64(axis), len(in.axes)) != sAxis {
			return false, false
		}
		start, ok1 := g.Scalar(ins[1])
		end, ok2 := g.Scalar(ins[2])
		lo, hi := clampIndex(start, in.stacks), clampIndex(end, in.stacks)
		return true, ok1 && ok2 && hi == lo+1 && (len(ins) < 5 || sliceStep(g, ins[4]) == 1) && pick(lo)
	case "Gather":
		if normAxis(n.Int("axis", 0), len(in.axes)) != sAxis {
			return false, false
		}
		idx, ok := constInts(g, ins[1])
		t, err := g.Constant(ins[1])
		if !ok || err != nil || len(idx) != 1 || t.Dims() > 1 || !pick(idx[0]) {
			return true, false
		}
		if t.Dims() == 0 { // a scalar index drops the axis
			in.axes, in.stacks = slices.Delete(in.axes, sAxis, sAxis+1), 0
		}
		return true, true
	case "Split":
		if normAxis(n.Int("axis", 0), len(in.axes)) != sAxis {
			return false, false
		}
		out := slices.Index(n.Outputs(), v)
		if out < 0 || len(n.Outputs()) != in.stacks {
			return true, false
		}
		if len(ins) > 1 && ins[1] != "" {
			sizes, ok := constInts(g, ins[1])
			if !ok || slices.ContainsFunc(sizes, func(s int) bool { return s != 1 }) {
				return true, false
			}
		}
		return true, pick(out)
	case "Squeeze":
		axes := n.Ints("axes")
		if len(ins) > 1 && ins[1] != "" {
			a, ok := constInts(g, ins[1])
			if !ok {
				return true, false
			}
			axes = nil
			for _, x := range a {
				axes = append(axes, int64(x))
			}
		}
		if len(axes) != 1 || normAxis(axes[0], len(in.axes)) != sAxis {
			return false, false
		}
		if in.stacks != 1 {
			return true, false
		}
		in.axes, in.stacks = slices.Delete(in.axes, sAxis, sAxis+1), 0
		return true, true
	}
	return false, false
}

// sliceStep is a Slice's constant step, 0 when it is not one.
func sliceStep(g match.Graph, v string) int {
	step, ok := g.Scalar(v)
	if !ok {
		return 0
	}
	return int(step)
}

// pickGroups keeps the groups at idx (negative counting from the end).
func pickGroups(in *groupView, idx []int) (*groupView, bool) {
	picked := make([]int, 0, len(idx))
	for _, i := range idx {
		if i < 0 {
			i += len(in.groups)
		}
		if i < 0 || i >= len(in.groups) {
			return nil, false
		}
		picked = append(picked, in.groups[i])
	}
	in.groups, in.picked = picked, true
	return in, true
}

// slicedGroups applies a Slice on the groups axis (steps of 1).
func slicedGroups(g match.Graph, n *match.Node, in *groupView, gAxis int) (*groupView, bool) {
	ins := n.Inputs()
	if len(ins) < 4 {
		return nil, false
	}
	start, ok1 := g.Scalar(ins[1])
	end, ok2 := g.Scalar(ins[2])
	axis, ok3 := g.Scalar(ins[3])
	if !ok1 || !ok2 || !ok3 || normAxis(int64(axis), len(in.axes)) != gAxis {
		return nil, false
	}
	if len(ins) == 5 {
		if step, ok := g.Scalar(ins[4]); !ok || step != 1 {
			return nil, false
		}
	}
	lo, hi := clampIndex(start, len(in.groups)), clampIndex(end, len(in.groups))
	if lo >= hi {
		return nil, false
	}
	in.groups, in.picked = in.groups[lo:hi], true
	return in, true
}

// splitGroups applies the Split on the groups axis whose output v is.
func splitGroups(g match.Graph, n *match.Node, v string, in *groupView, gAxis int) (*groupView, bool) {
	if normAxis(n.Int("axis", 0), len(in.axes)) != gAxis {
		return nil, false
	}
	out := slices.Index(n.Outputs(), v)
	var sizes []int
	if ins := n.Inputs(); len(ins) > 1 && ins[1] != "" {
		s, ok := constInts(g, ins[1])
		if !ok {
			return nil, false
		}
		sizes = s
	} else if k := len(n.Outputs()); len(in.groups)%k == 0 {
		for range k {
			sizes = append(sizes, len(in.groups)/k)
		}
	} else {
		return nil, false
	}
	if out < 0 || out >= len(sizes) {
		return nil, false
	}
	lo := 0
	for _, s := range sizes[:out] {
		lo += s
	}
	if lo+sizes[out] > len(in.groups) {
		return nil, false
	}
	in.groups, in.picked = in.groups[lo:lo+sizes[out]], true
	return in, true
}

// constInts reads a constant integer tensor, flattened.
func constInts(g match.Graph, v string) ([]int, bool) {
	t, err := g.Constant(v)
	if err != nil {
		return nil, false
	}
	f, err := match.Floats(t)
	if err != nil {
		return nil, false
	}
	out := make([]int, len(f))
	for i, x := range f {
		out[i] = int(x)
	}
	return out, true
}

// normAxis resolves a negative axis of a rank-r value; -1 when out of range.
func normAxis(axis int64, r int) int {
	if axis < 0 {
		axis += int64(r)
	}
	if axis < 0 || axis >= int64(r) {
		return -1
	}
	return int(axis)
}

// clampIndex resolves a Slice bound against n entries, as ONNX clamps it.
func clampIndex(x float64, n int) int {
	if x < 0 {
		x += float64(n)
	}
	return int(math.Max(0, math.Min(x, float64(n))))
}
