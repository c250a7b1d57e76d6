package exec

import (
	"math"
	"testing"
)

// TestReductions checks the Reduce ops of ops_reductions.go and
// ArgMax/ArgMin on small tensors worked out by hand.
func TestReductions(t *testing.T) {
	x := f32(dims(2, 3), 1, -2, 3, 4, 5, -6)
	axes1 := i64(dims(1), 1)
	runOpCases(t, []opCase{
		{name: "min axis 1 input", op: "ReduceMin", opset: 18, in: []*value{x, axes1}, want: []*value{f32(dims(2, 1), -2, -6)}},
		{name: "min axis attribute", op: "ReduceMin", opset: 13, attrs: attrs{"axes": aInts(0), "keepdims": aInt(0)}, in: []*value{x}, want: []*value{f32(dims(3), 1, -2, -6)}},
		{name: "min NaN propagates", op: "ReduceMin", opset: 18, in: []*value{f32(dims(3), 1, float32(math.NaN()), -1)}, want: []*value{f32(dims(1), float32(math.NaN()))}},
		{name: "min int8", op: "ReduceMin", opset: 18, attrs: attrs{"keepdims": aInt(0)}, in: []*value{valueOf(dims(3), []int8{5, -7, 3})}, want: []*value{valueOf(dims(), []int8{-7})}},
		{name: "min bool", op: "ReduceMin", opset: 20, attrs: attrs{"keepdims": aInt(0)}, in: []*value{bools(dims(2, 2), true, false, true, true), axes1}, want: []*value{bools(dims(2), false, true)}},
		{name: "prod axis 0", op: "ReduceProd", opset: 18, attrs: attrs{"keepdims": aInt(0)}, in: []*value{x, i64(dims(1), 0)}, want: []*value{f32(dims(3), 4, -10, -18)}},
		{name: "prod int64", op: "ReduceProd", opset: 13, in: []*value{i64(dims(3), 3, -4, 5)}, want: []*value{i64(dims(1), -60)}},
		{name: "l1 all", op: "ReduceL1", opset: 18, attrs: attrs{"keepdims": aInt(0)}, in: []*value{x}, want: []*value{f32(dims(), 21)}},
		{name: "l1 int32", op: "ReduceL1", opset: 18, in: []*value{i32(dims(2), -3, 4), i64(dims(1), -1)}, want: []*value{i32(dims(1), 7)}},
		{name: "sum square", op: "ReduceSumSquare", opset: 18, in: []*value{x, axes1}, want: []*value{f32(dims(2, 1), 14, 77)}},
		{name: "log sum", op: "ReduceLogSum", opset: 18, in: []*value{f32(dims(2, 3), 1, 2, 3, 4, 5, 6), axes1}, want: []*value{f32(dims(2, 1), float32(math.Log(6)), float32(math.Log(15)))}},
		{name: "log sum exp", op: "ReduceLogSumExp", opset: 18, attrs: attrs{"keepdims": aInt(0)}, in: []*value{x, i64(dims(1), 0)}, want: []*value{f32(dims(3), 4.0485873, 5.0009115, 3.0001234)}},
		{name: "log sum exp large", op: "ReduceLogSumExp", opset: 13, in: []*value{f32(dims(2), 1000, 1000)}, want: []*value{f32(dims(1), float32(1000+math.Ln2))}},
		{name: "log sum exp -inf", op: "ReduceLogSumExp", opset: 13, in: []*value{f32(dims(2), float32(math.Inf(-1)), float32(math.Inf(-1)))}, want: []*value{f32(dims(1), float32(math.Inf(-1)))}},
		{name: "noop with empty axes", op: "ReduceProd", opset: 18, attrs: attrs{"noop_with_empty_axes": aInt(1)}, in: []*value{x}, want: []*value{x}},
		{name: "log sum int refused", op: "ReduceLogSum", opset: 18, in: []*value{i32(dims(1), 1)}, err: "want float32 or float64"},
		{name: "repeated axis", op: "ReduceMin", opset: 18, in: []*value{x, i64(dims(2), 1, -1)}, err: "appears twice"},

		{name: "argmax", op: "ArgMax", opset: 13, attrs: attrs{"axis": aInt(1)}, in: []*value{f32(dims(2, 3), 1, 3, 3, 7, 2, 7)}, want: []*value{i64(dims(2, 1), 1, 0)}},
		{name: "argmax last index", op: "ArgMax", opset: 13, attrs: attrs{"axis": aInt(1), "select_last_index": aInt(1), "keepdims": aInt(0)}, in: []*value{f32(dims(2, 3), 1, 3, 3, 7, 2, 7)}, want: []*value{i64(dims(2), 2, 2)}},
		{name: "argmin axis 0", op: "ArgMin", opset: 11, attrs: attrs{"keepdims": aInt(0)}, in: []*value{f32(dims(2, 3), 1, -3, 3, 0, 2, 3)}, want: []*value{i64(dims(3), 1, 0, 0)}},
		{name: "argmin last index", op: "ArgMin", opset: 12, attrs: attrs{"select_last_index": aInt(1), "keepdims": aInt(0)}, in: []*value{f32(dims(2, 3), 1, -3, 3, 0, 2, 3)}, want: []*value{i64(dims(3), 1, 0, 1)}},
		{name: "argmax NaN wins", op: "ArgMax", opset: 13, in: []*value{f32(dims(3), 1, float32(math.NaN()), 5)}, want: []*value{i64(dims(1), 1)}},
		{name: "argmax int64 beyond 2^53", op: "ArgMax", opset: 13, attrs: attrs{"keepdims": aInt(0)}, in: []*value{i64(dims(2), 1<<60, 1<<60+1)}, want: []*value{i64(dims(), 1)}},
	})
}
