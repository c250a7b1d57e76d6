package exec

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Values for tests.
func f32(shape []int, data ...float32) *value { return valueOf(shape, data) }
func f64(shape []int, data ...float64) *value { return valueOf(shape, data) }
func i64(shape []int, data ...int64) *value   { return valueOf(shape, data) }
func i32(shape []int, data ...int32) *value   { return valueOf(shape, data) }
func bools(shape []int, data ...bool) *value  { return valueOf(shape, data) }
func dims(d ...int) []int                     { return d }

// Attributes for tests.
func aInt(v int64) attribute         { return attribute{kind: attrInt, i: v} }
func aInts(v ...int64) attribute     { return attribute{kind: attrInts, ints: v} }
func aFloat(v float32) attribute     { return attribute{kind: attrFloat, f: v} }
func aFloats(v ...float32) attribute { return attribute{kind: attrFloats, floats: v} }
func aTensor(v *value) attribute     { return attribute{kind: attrTensor, t: v} }

type attrs = map[string]attribute

// opCase is one table-driven op test: a node, its inputs, and either the
// expected outputs or a substring of the expected error.
type opCase struct {
	name  string
	op    string
	opset int
	attrs attrs
	in    []*value // nil entries are omitted optional inputs
	outs  int      // outputs the node asks for; defaults to len(want) or 1
	want  []*value
	err   string
}

// runOp runs an op kernel directly, as runNode would.
func runOp(c opCase) ([]*value, error) {
	spec, ok := ops[c.op]
	if !ok {
		panic("no op " + c.op)
	}
	outs := c.outs
	if outs == 0 {
		outs = max(len(c.want), 1)
	}
	n := &node{name: c.name, op: c.op, opset: c.opset, spec: spec, attrs: c.attrs}
	for i := range outs {
		n.out = append(n.out, i)
	}
	return spec.run(testRun, n, c.in)
}

// runOpCases runs a table of op cases as subtests.
func runOpCases(t *testing.T, cases []opCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := runOp(c)
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				return
			}
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(got), len(c.want))
			for i, w := range c.want {
				assertValue(t, w, got[i])
			}
		})
	}
}

// assertValue compares dtype, shape and elements: floats to 1e-5 relative
// and 1e-6 absolute (NaN equals NaN), everything else exactly.
func assertValue(t *testing.T, want, got *value) {
	t.Helper()
	require.NotNil(t, got)
	require.Equal(t, want.dtype, got.dtype, "dtype")
	require.Truef(t, equalShapes(want.shape, got.shape), "shape %s, want %s", shapeString(got.shape), shapeString(want.shape))
	if !want.dtype.IsFloat() {
		if want.size() > 0 {
			assert.Equal(t, want.data, got.data)
		}
		return
	}
	w, g := castTo[float64](want.data), castTo[float64](got.data)
	for i := range w {
		ok := math.IsNaN(w[i]) && math.IsNaN(g[i]) || w[i] == g[i] ||
			math.Abs(w[i]-g[i]) <= 1e-6+1e-5*math.Abs(w[i])
		assert.Truef(t, ok, "element %d: got %v, want %v", i, g[i], w[i])
	}
}

// testRun is the run context op-level tests pass: no deadline, the default budget.
var testRun = newRunCtx(context.Background(), nil)
