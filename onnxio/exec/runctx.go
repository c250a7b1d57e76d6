package exec

import (
	"context"
	"fmt"

	"github.com/attnrun/attnrun/internal/budget"
)

// runCtx is what one run of the graph hands every op: the caller's context
// (deadline, cancellation) and the memory budget that values sized from the
// file are reserved from.
type runCtx struct {
	ctx    context.Context
	budget *budget.Budget
}

// newRunCtx returns a run context; a nil ctx means context.Background and a
// nil budget applies budget.DefaultLimit to each allocation.
func newRunCtx(ctx context.Context, b *budget.Budget) *runCtx {
	if ctx == nil {
		ctx = context.Background()
	}
	return &runCtx{ctx: ctx, budget: b}
}

// alloc returns a zero-filled value of shape after checking its size
// against the budget; the error names the node, the element type and the
// shape.
func (rc *runCtx) alloc(n *node, dt DType, shape []int) (*value, error) {
	elems := budget.Elements(shape)
	if err := rc.budget.Reserve(budget.Bytes(elems, dt.size()), fmt.Sprintf("node %s (%s): %s %s", n.label(), n.op, dt, shapeString(shape))); err != nil {
		return nil, err
	}
	rc.budget.Release(budget.Bytes(elems, dt.size()))
	return newValue(dt, shape), nil
}
