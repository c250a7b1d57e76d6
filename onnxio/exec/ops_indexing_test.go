package exec

import "testing"

// TestIndexingOps checks the index-driven ops of ops_indexing.go and
// ops_scan.go on examples worked out by hand (most after the spec's own).
func TestIndexingOps(t *testing.T) {
	data := f32(dims(3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9)
	str := func(s string) attribute { return attribute{kind: attrString, s: s} }
	runOpCases(t, []opCase{
		{name: "gather elements axis 1", op: "GatherElements", opset: 13, attrs: attrs{"axis": aInt(1)}, in: []*value{f32(dims(2, 2), 1, 2, 3, 4), i64(dims(2, 2), 0, 0, 1, 0)}, want: []*value{f32(dims(2, 2), 1, 1, 4, 3)}},
		{name: "gather elements negative", op: "GatherElements", opset: 13, in: []*value{data, i32(dims(2, 3), 1, 2, 0, 2, 0, -1)}, want: []*value{f32(dims(2, 3), 4, 8, 3, 7, 2, 9)}},
		{name: "gather elements out of range", op: "GatherElements", opset: 13, in: []*value{data, i64(dims(1, 1), 3)}, err: "axis index 3 is out of range for size 3"},
		{name: "gather nd", op: "GatherND", opset: 13, in: []*value{i32(dims(2, 2), 0, 1, 2, 3), i64(dims(2, 2), 0, 0, 1, 1)}, want: []*value{i32(dims(2), 0, 3)}},
		{name: "gather nd slices", op: "GatherND", opset: 13, in: []*value{i32(dims(2, 2), 0, 1, 2, 3), i64(dims(2, 1), 1, 0)}, want: []*value{i32(dims(2, 2), 2, 3, 0, 1)}},
		{name: "gather nd batch dims", op: "GatherND", opset: 12, attrs: attrs{"batch_dims": aInt(1)}, in: []*value{i32(dims(2, 2, 2), 0, 1, 2, 3, 4, 5, 6, 7), i64(dims(2, 1), 1, 0)}, want: []*value{i32(dims(2, 2), 2, 3, 4, 5)}},
		{name: "scatter elements", op: "ScatterElements", opset: 18, attrs: attrs{"axis": aInt(1)}, in: []*value{f32(dims(1, 5), 1, 2, 3, 4, 5), i64(dims(1, 2), 1, 3), f32(dims(1, 2), 1.1, 2.1)}, want: []*value{f32(dims(1, 5), 1, 1.1, 3, 2.1, 5)}},
		{name: "scatter elements add duplicates", op: "ScatterElements", opset: 16, attrs: attrs{"axis": aInt(1), "reduction": str("add")}, in: []*value{f32(dims(1, 5), 1, 2, 3, 4, 5), i64(dims(1, 2), 1, 1), f32(dims(1, 2), 1.1, 2.1)}, want: []*value{f32(dims(1, 5), 1, 5.2, 3, 4, 5)}},
		{name: "scatter elements max", op: "ScatterElements", opset: 18, attrs: attrs{"reduction": str("max")}, in: []*value{i64(dims(3), 5, 5, 5), i64(dims(2), 0, -1), i64(dims(2), 9, 1)}, want: []*value{i64(dims(3), 9, 5, 5)}},
		{name: "scatter elements max before 18", op: "ScatterElements", opset: 16, attrs: attrs{"reduction": str("max")}, in: []*value{i64(dims(1), 5), i64(dims(1), 0), i64(dims(1), 9)}, err: `reduction "max" is not supported at opset 16`},
		{name: "scatter nd", op: "ScatterND", opset: 13, in: []*value{f32(dims(8), 1, 2, 3, 4, 5, 6, 7, 8), i64(dims(4, 1), 4, 3, 1, 7), f32(dims(4), 9, 10, 11, 12)}, want: []*value{f32(dims(8), 1, 11, 3, 10, 9, 6, 7, 12)}},
		{name: "scatter nd slices mul", op: "ScatterND", opset: 16, attrs: attrs{"reduction": str("mul")}, in: []*value{i32(dims(2, 2), 1, 2, 3, 4), i64(dims(1, 1), 1), i32(dims(1, 2), 10, 100)}, want: []*value{i32(dims(2, 2), 1, 2, 30, 400)}},
		{name: "scatter nd bool", op: "ScatterND", opset: 18, in: []*value{bools(dims(2), false, false), i64(dims(1, 1), 1), bools(dims(1), true)}, want: []*value{bools(dims(2), false, true)}},
		{name: "scatter nd bad updates", op: "ScatterND", opset: 18, in: []*value{f32(dims(2), 1, 2), i64(dims(1, 1), 1), f32(dims(2), 1, 2)}, err: "updates have shape (2,), want (1,)"},
		{name: "nonzero", op: "NonZero", opset: 13, in: []*value{f32(dims(2, 2), 1, 0, 1, 1)}, want: []*value{i64(dims(2, 3), 0, 1, 1, 0, 0, 1)}},
		{name: "one hot", op: "OneHot", opset: 11, in: []*value{i64(dims(3), 0, 2, -1), f32(dims(), 3), f32(dims(2), 0, 5)}, want: []*value{f32(dims(3, 3), 5, 0, 0, 0, 0, 5, 0, 0, 5)}},
		{name: "one hot opset 9 negative is off", op: "OneHot", opset: 9, in: []*value{i64(dims(2), -1, 1), i64(dims(), 2), f32(dims(2), 0, 1)}, want: []*value{f32(dims(2, 2), 0, 0, 0, 1)}},
		{name: "one hot axis 0 out of range", op: "OneHot", opset: 11, attrs: attrs{"axis": aInt(0)}, in: []*value{f32(dims(2), 1, 7), i64(dims(1), 2), i32(dims(2), -1, 1)}, want: []*value{i32(dims(2, 2), -1, -1, 1, -1)}},
		{name: "eye like", op: "EyeLike", opset: 22, attrs: attrs{"k": aInt(1)}, in: []*value{i32(dims(2, 3), 0, 0, 0, 0, 0, 0)}, want: []*value{i32(dims(2, 3), 0, 1, 0, 0, 0, 1)}},
		{name: "eye like dtype", op: "EyeLike", opset: 9, attrs: attrs{"dtype": aInt(int64(Float64)), "k": aInt(-1)}, in: []*value{i32(dims(2, 2), 0, 0, 0, 0)}, want: []*value{f64(dims(2, 2), 0, 0, 1, 0)}},

		{name: "cumsum", op: "CumSum", opset: 14, in: []*value{f64(dims(5), 1, 2, 3, 4, 5), i32(dims(), 0)}, want: []*value{f64(dims(5), 1, 3, 6, 10, 15)}},
		{name: "cumsum exclusive reverse", op: "CumSum", opset: 11, attrs: attrs{"exclusive": aInt(1), "reverse": aInt(1)}, in: []*value{f32(dims(5), 1, 2, 3, 4, 5), i64(dims(1), 0)}, want: []*value{f32(dims(5), 14, 12, 9, 5, 0)}},
		{name: "cumsum axis 1 int", op: "CumSum", opset: 14, in: []*value{i64(dims(2, 3), 1, 2, 3, 4, 5, 6), i64(dims(), -1)}, want: []*value{i64(dims(2, 3), 1, 3, 6, 4, 9, 15)}},
		{name: "cumsum axis 0 reverse", op: "CumSum", opset: 14, attrs: attrs{"reverse": aInt(1)}, in: []*value{i32(dims(2, 2), 1, 2, 3, 4), i64(dims(), 0)}, want: []*value{i32(dims(2, 2), 4, 6, 3, 4)}},
		{name: "cumprod", op: "CumProd", opset: 26, in: []*value{i64(dims(3), 1, 2, 3), i64(dims(), 0)}, want: []*value{i64(dims(3), 1, 2, 6)}},
		{name: "cumprod exclusive", op: "CumProd", opset: 26, attrs: attrs{"exclusive": aInt(1)}, in: []*value{f32(dims(3), 1, 2, 3), i64(dims(), 0)}, want: []*value{f32(dims(3), 1, 1, 2)}},
		{name: "cumprod reverse", op: "CumProd", opset: 26, attrs: attrs{"reverse": aInt(1)}, in: []*value{f64(dims(3), 1, 2, 3), i32(dims(), 0)}, want: []*value{f64(dims(3), 6, 6, 3)}},
		{name: "cumprod exclusive reverse", op: "CumProd", opset: 26, attrs: attrs{"exclusive": aInt(1), "reverse": aInt(1)}, in: []*value{i32(dims(3), 1, 2, 3), i64(dims(), -1)}, want: []*value{i32(dims(3), 6, 3, 1)}},
		{name: "topk", op: "TopK", opset: 11, in: []*value{f32(dims(2, 4), 0, 1, 2, 3, 3, 1, 3, 0), i64(dims(1), 2)}, want: []*value{f32(dims(2, 2), 3, 2, 3, 3), i64(dims(2, 2), 3, 2, 0, 2)}},
		{name: "topk smallest axis 0", op: "TopK", opset: 11, attrs: attrs{"largest": aInt(0), "axis": aInt(0)}, in: []*value{i64(dims(3, 2), 5, 1, 2, 1, 2, 0), i64(dims(1), 2)}, want: []*value{i64(dims(2, 2), 2, 0, 2, 1), i64(dims(2, 2), 1, 2, 2, 0)}},
		{name: "topk K too large", op: "TopK", opset: 10, in: []*value{f32(dims(2), 1, 2), i64(dims(1), 3)}, err: "k 3 is out of range"},
	})
}
