package exec

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/internal/budget"
)

// TestNewOpsHonourTheBudget checks that ops whose output size comes from
// the data (OneHot's depth, Pad's pads, Einsum's broadcast, a broadcast
// Mod) reserve it from the run's memory budget before
// allocating.
func TestNewOpsHonourTheBudget(t *testing.T) {
	rc := newRunCtx(context.Background(), budget.New(1<<10))
	str := func(s string) attribute { return attribute{kind: attrString, s: s} }
	cases := []opCase{
		{name: "onehot depth", op: "OneHot", opset: 11, in: []*value{i64(dims(4), 0, 1, 2, 3), i64(dims(), 1<<20), f32(dims(2), 0, 1)}},
		{name: "pad", op: "Pad", opset: 11, in: []*value{f32(dims(1), 1), i64(dims(2), 1<<20, 0)}},
		{name: "einsum outer product", op: "Einsum", opset: 12, attrs: attrs{"equation": str("i,j->ij")}, in: []*value{f32(dims(1000), make([]float32, 1000)...), f32(dims(1000), make([]float32, 1000)...)}},
		{name: "mod broadcast", op: "Mod", opset: 13, in: []*value{i32(dims(1000, 1), make([]int32, 1000)...), i32(dims(1, 1000), slices.Repeat([]int32{3}, 1000)...)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := ops[c.op]
			n := &node{name: c.name, op: c.op, opset: c.opset, spec: spec, attrs: c.attrs, out: []int{0}}
			_, err := spec.run(rc, n, c.in)
			require.Error(t, err)
			assert.ErrorIs(t, err, budget.ErrExceeded)
			assert.Contains(t, err.Error(), "over the memory budget of 1 KiB") // runNode adds the node's name
		})
	}
}
