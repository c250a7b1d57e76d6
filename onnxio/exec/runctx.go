package exec

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"unsafe"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/kernels"
)

// runCtx is what one run of the graph hands every op: the caller's context
// (deadline, cancellation) and the memory budget that buffers sized from
// the file or the inputs are reserved from.
//
// Memory is accounted per block, one block per allocation. Every value
// made from a block points to it, views included (Reshape, Squeeze,
// Identity and the like share their input's data), and the block counts
// the environment slots holding such values. A block is released when the
// last of them is dropped, so a view never releases memory that another
// value still reads, nor releases it twice. Blocks no slot holds once the
// node that made them is done (temporaries, outputs nobody reads) are
// released then.
type runCtx struct {
	ctx    context.Context
	budget *budget.Budget
	// track is set for graph runs; op tests run without bookkeeping.
	track bool
	// pending lists the blocks that may have no holder any more: those
	// reserved since the last settle, and those whose last holder was
	// dropped.
	pending []*block
	// weights are the graph's packed constant operands (weights.go).
	weights map[weightKey]*kernels.PackedB
	// A planned run (plan.go) takes its buffers from arena; allocs counts
	// the allocations so far. A recorded run notes what the plan needs in
	// rec. pos is the position of the node running, for both.
	plan   *plan
	arena  *arena
	allocs int
	rec    *recorder
	pos    int
	// args is a stack of node inputs (runStep), kept across nodes.
	args []*value
	// result backs the slice one returns, results the slice outputs
	// returns.
	result  [1]*value
	results []*value
	// heads is the fused attention's list of heads (headList), kept
	// across the nodes of the run and, in a plan's arena, across runs.
	heads []kernels.Head
}

// headList returns a list of count attention heads, whose bytes it
// reserves from the budget for the caller to release; its memory is the
// run context's, reused by the next fused attention.
func (rc *runCtx) headList(count int) ([]kernels.Head, int64, error) {
	bytes := budget.Bytes(int64(count), int(unsafe.Sizeof(kernels.Head{})))
	if err := rc.reserveBytes(bytes, func() string { return fmt.Sprintf("attention heads (%d elements)", count) }); err != nil {
		return nil, 0, err
	}
	if cap(rc.heads) < count {
		rc.heads = make([]kernels.Head, count)
	}
	return rc.heads[:count], bytes, nil
}

// dropHeads lets go of a list headList returned: its views of the run's
// values, and its bytes.
func (rc *runCtx) dropHeads(h []kernels.Head, bytes int64) {
	clear(h)
	rc.budget.Release(bytes)
}

// one returns v as an op's only output, in a slice the run context owns:
// valid until the next op returns through it, so callers store the
// outputs before running another op (runStep, runOriginal do).
func (rc *runCtx) one(v *value) ([]*value, error) {
	rc.result[0] = v
	return rc.result[:], nil
}

// outputs returns a slice of count outputs for a node to fill and
// return, the run context's, reused by the next node that asks.
func (rc *runCtx) outputs(count int) []*value {
	rc.results = slices.Grow(rc.results[:0], count)[:count]
	clear(rc.results)
	return rc.results
}

// block is one reservation from the run's budget.
type block struct {
	bytes    int64 // reserved; 0 once released
	holders  int   // environment slots holding a value of this block
	released int   // the node position at which it was released; -1 before
	arena    bool  // its memory belongs to a plan's arena, not to the caller
}

// newRunCtx returns a run context; a nil ctx means context.Background. A
// nil budget applies budget.DefaultLimit to each allocation on its own and
// tracks nothing; a run passes its own budget, which is tracked.
func newRunCtx(ctx context.Context, b *budget.Budget) *runCtx {
	if ctx == nil {
		ctx = context.Background()
	}
	return &runCtx{ctx: ctx, budget: b, track: b != nil}
}

// err reports why the run must stop (deadline exceeded or cancelled), or
// nil.
func (rc *runCtx) err() error { return rc.ctx.Err() }

// alloc returns a zero-filled value of shape for node n after checking
// its size against the budget. The error names the element type, the
// shape and the bytes, and runNode adds the node.
func (rc *runCtx) alloc(n *node, dt DType, shape []int) (*value, error) {
	return rc.allocate(dt, shape, true)
}

// allocFull is alloc for a value the op writes in full before it reads
// any of it (a product's output, an elementwise result): a planned run's
// buffer is not zeroed first, which at MiniLM's B=32, T=128 was a tenth
// of the pass. A fresh allocation is zero anyway.
func (rc *runCtx) allocFull(n *node, dt DType, shape []int) (*value, error) {
	return rc.allocate(dt, shape, false)
}

// allocate is alloc, zeroing a planned buffer when zero is set.
func (rc *runCtx) allocate(dt DType, shape []int, zero bool) (*value, error) {
	if err := checkExtent(shape); err != nil {
		return nil, err
	}
	elems := budget.Elements(shape)
	bytes := budget.Bytes(elems, dt.size())
	if err := rc.reserveBytes(bytes, func() string { return dt.String() + " " + shapeString(shape) }); err != nil {
		return nil, err
	}
	if rc.plan != nil {
		if v, b, ok := rc.allocFrom(dt, int(elems), bytes, zero); ok {
			rc.pending = append(rc.pending, b)
			v.shape = shape
			return v, nil
		}
	}
	b := rc.newBlock(bytes)
	if rc.rec != nil {
		rc.rec.allocs = append(rc.rec.allocs, allocNote{dtype: dt, elems: int(elems), pos: rc.pos, blk: b})
	}
	return &value{dtype: dt, shape: shape, data: makeSlice(dt, int(elems)), mem: b}, nil
}

// scratch returns a zeroed buffer of count elements that no value holds
// (scores, masks, kernel arguments), reserved until the node is done;
// purpose names it in errors.
func scratch[T any](rc *runCtx, n *node, count int, purpose string) ([]T, error) {
	if err := rc.reserve(n, reflect.TypeFor[T]().Size(), int64(count), purpose); err != nil {
		return nil, err
	}
	return make([]T, count), nil
}

// reserve takes the bytes of elems elements of elemSize bytes for a
// buffer of node n that no value holds, until the node is done.
func (rc *runCtx) reserve(n *node, elemSize uintptr, elems int64, purpose string) error {
	_, err := rc.take(budget.Bytes(elems, int(elemSize)), func() string {
		return fmt.Sprintf("%s (%d elements)", purpose, elems)
	})
	return err
}

// take reserves bytes, naming the buffer with what() only when the budget
// refuses, and returns the block (nil when not tracking).
func (rc *runCtx) take(bytes int64, what func() string) (*block, error) {
	if err := rc.reserveBytes(bytes, what); err != nil {
		return nil, err
	}
	return rc.newBlock(bytes), nil
}

// reserveBytes reserves bytes, naming the buffer with what() only when
// the budget refuses.
func (rc *runCtx) reserveBytes(bytes int64, what func() string) error {
	if err := rc.budget.Reserve(bytes, ""); err != nil {
		var e *budget.ExceededError
		if errors.As(err, &e) {
			e.What = what()
		}
		return err
	}
	return nil
}

// newBlock records a reservation of bytes made, released at a later
// settle; nil when not tracking.
func (rc *runCtx) newBlock(bytes int64) *block {
	if !rc.track {
		return nil
	}
	b := &block{bytes: bytes, released: -1}
	rc.pending = append(rc.pending, b)
	return b
}

// hold records that an environment slot now holds v.
func (rc *runCtx) hold(v *value) {
	if v != nil && v.mem != nil {
		v.mem.holders++
	}
}

// drop records that an environment slot no longer holds v; v's block is
// released at the next settle unless a slot holds it again by then.
func (rc *runCtx) drop(v *value) {
	if v == nil || v.mem == nil {
		return
	}
	if v.mem.holders--; v.mem.holders <= 0 {
		rc.pending = append(rc.pending, v.mem)
	}
}

// settle releases the pending blocks that no slot holds.
func (rc *runCtx) settle() {
	for _, b := range rc.pending {
		if b.holders <= 0 && b.bytes > 0 {
			rc.budget.Release(b.bytes)
			b.bytes = 0
			b.released = rc.pos
		}
	}
	clear(rc.pending)
	rc.pending = rc.pending[:0]
}
