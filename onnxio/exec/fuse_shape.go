package exec

import "fmt"

// Shapes of broadcasts. Grouped-query attention repeats the key and value
// heads with Reshape(Expand(Unsqueeze(X))), and PyTorch's export reads the
// shape of the repeated values besides the product: that Shape alone keeps
// the Expand's copy of the whole KV cache computed after the attention
// fusion reads X in place. shapeOfExpand makes each Shape of an Expand, or
// of a Reshape of one, compute the dimensions from the Expand's input and
// the two shape operands instead.

func init() {
	registerFusion(fusion{name: "shape of expand", order: 31, run: shapeOfExpand})
}

// shapeOfExpand rewrites Shape(Expand(x, s)) and Shape(Reshape(Expand(x,
// s), t)) to read x, s (and t).
func shapeOfExpand(f *fuser, order []*node) []*node {
	for i, n := range order {
		if n.op != "Shape" || len(n.in) != 1 || n.in[0] < 0 {
			continue
		}
		p := f.producer(n.in[0])
		var reshape *node
		if p != nil && p.op == "Reshape" && len(p.in) == 2 && p.in[1] >= 0 && !f.removed[p] {
			reshape, p = p, f.producer(p.in[0])
		}
		if p == nil || p.op != "Expand" || len(p.in) != 2 || p.in[1] < 0 || f.removed[p] {
			continue
		}
		m := *n
		m.in = []int{p.in[0], p.in[1]}
		m.inName = []string{p.inName[0], p.inName[1]}
		if reshape != nil {
			m.in = append(m.in, reshape.in[1])
			m.inName = append(m.inName, reshape.inName[1])
		}
		m.spec = &opSpec{minIn: len(m.in), maxIn: len(m.in), minOut: 1, maxOut: 1, run: expandedShapeOp(p, reshape)}
		order[i] = &m
	}
	return order
}

// expandedShapeOp returns the op computing Shape(Expand(x, s)), or
// Shape(Reshape(Expand(x, s), t)) when reshape is not nil, from x, s and
// t, with the errors of the nodes it stands for.
func expandedShapeOp(expand, reshape *node) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		x := in[0]
		target, err := shapeInput(rc, expand, in[1])
		if err != nil {
			return nil, fmt.Errorf("the Expand before it (%s): %w", expand.label(), err)
		}
		shape, err := broadcastShapes(x.shape, target)
		if err != nil {
			return nil, fmt.Errorf("the Expand before it (%s): %w", expand.label(), err)
		}
		if reshape != nil {
			spec, err := ints(rc, reshape, in[2])
			if err == nil {
				shape, err = reshapeTarget(shape, spec, reshape.attrInt("allowzero", 0) == 1)
			}
			if err != nil {
				return nil, fmt.Errorf("the Reshape before it (%s): %w", reshape.label(), err)
			}
		}
		return shapeOp(rc, n, []*value{{dtype: x.dtype, shape: shape}})
	}
}
