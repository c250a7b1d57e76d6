package exec

import (
	"math"
	"testing"
)

// TestShapeArithmeticOverflow covers issue 10 (item 3): sizes, steps and
// counts at the ends of int64, where the arithmetic used to wrap. The
// expected values are numpy's (x[start:end:step], np.arange) where numpy
// computes exactly; where its float64 length rounds, the exact count of
// the ONNX formula max(ceil((limit - start) / delta), 0), said so below.
func TestShapeArithmeticOverflow(t *testing.T) {
	const hi, lo = math.MaxInt64, math.MinInt64
	x := i64(dims(3, 2), 0, 1, 2, 3, 4, 5) // np.arange(6).reshape(3, 2)
	one := func(v int64) *value { return i64(dims(1), v) }
	slice := func(start, end, step int64) []*value { return []*value{x, one(start), one(end), one(0), one(step)} }
	runOpCases(t, []opCase{
		// x[0:3:2**63-1], x[-2**63:2**63-1:2**63-1]: the first row only.
		{name: "slice step MaxInt64", op: "Slice", opset: 13, in: slice(0, 3, hi), want: []*value{i64(dims(1, 2), 0, 1)}},
		{name: "slice whole range step MaxInt64", op: "Slice", opset: 13, in: slice(lo, hi, hi), want: []*value{i64(dims(1, 2), 0, 1)}},
		// x[2**63-1:-2**63:-2**63], x[-1:-2**63:-2**63]: the last row only.
		{name: "slice step MinInt64", op: "Slice", opset: 13, in: slice(hi, lo, lo), want: []*value{i64(dims(1, 2), 4, 5)}},
		{name: "slice from -1 step MinInt64", op: "Slice", opset: 13, in: slice(-1, lo, lo), want: []*value{i64(dims(1, 2), 4, 5)}},
		// x[1:-2**63:-(2**63-1)]: row 1.
		{name: "slice step -MaxInt64", op: "Slice", opset: 13, in: slice(1, lo, -hi), want: []*value{i64(dims(1, 2), 2, 3)}},
		{name: "slice step 2 over MaxInt64 bounds", op: "Slice", opset: 13, in: slice(lo, hi, 2), want: []*value{i64(dims(2, 2), 0, 1, 4, 5)}},

		{name: "split sizes that wrap", op: "Split", opset: 13, in: []*value{x, i64(dims(3), hi, hi, 4)}, outs: 3,
			err: "split sizes [9223372036854775807 9223372036854775807 4] add up to more than the size 3 of axis 0"},
		{name: "split sizes that wrap to the size", op: "Split", opset: 13, in: []*value{x, i64(dims(3), hi, hi, 5)}, outs: 3,
			err: "add up to more than the size 3 of axis 0"},
		{name: "split sizes short", op: "Split", opset: 13, in: []*value{x, i64(dims(2), 1, 1)}, outs: 2,
			err: "split sizes [1 1] add up to 2, not the size 3 of axis 0"},

		// np.arange(2**63-10, 2**63-1, 3), np.arange(-2**63+5, -2**63, -2).
		{name: "range up to MaxInt64", op: "Range", opset: 13, in: []*value{i64(dims(), hi-10), i64(dims(), hi), i64(dims(), 3)},
			want: []*value{i64(dims(4), hi-10, hi-7, hi-4, hi-1)}},
		{name: "range down to MinInt64", op: "Range", opset: 13, in: []*value{i64(dims(), lo+5), i64(dims(), lo), i64(dims(), -2)},
			want: []*value{i64(dims(3), lo+5, lo+3, lo+1)}},
		// Where numpy's float64 length rounds, the ONNX formula's exact
		// count: ceil((-2**63 - 10) / -2**63) = ceil(1 + 10/2**63) = 2
		// (numpy: 1), and ceil((2**63-1 - -2**63) / (2**63-1)) = 3 (numpy: 2).
		{name: "range delta MinInt64", op: "Range", opset: 13, in: []*value{i64(dims(), 10), i64(dims(), lo), i64(dims(), lo)},
			want: []*value{i64(dims(2), 10, lo+10)}},
		{name: "range across all of int64", op: "Range", opset: 13, in: []*value{i64(dims(), lo), i64(dims(), hi), i64(dims(), hi)},
			want: []*value{i64(dims(3), lo, -1, hi-1)}},
		{name: "range int32 near its ends", op: "Range", opset: 13,
			in:   []*value{i32(dims(), math.MinInt32), i32(dims(), math.MaxInt32), i32(dims(), math.MaxInt32)},
			want: []*value{i32(dims(3), math.MinInt32, -1, math.MaxInt32-1)}},

		{name: "reshape dims whose product wraps", op: "Reshape", opset: 14, in: []*value{x, i64(dims(3), 1<<32, 1<<32, 6)},
			err: "cannot reshape (3, 2) (6 elements) to [4294967296 4294967296 6] (too many elements)"},
		{name: "reshape -1 with a product that wraps to a divisor", op: "Reshape", opset: 14, in: []*value{x, i64(dims(3), 1<<32, 1<<32, -1)},
			err: "cannot reshape (3, 2) (6 elements) to [4294967296 4294967296 -1]"},
		{name: "reshape empty to a huge empty shape", op: "Reshape", opset: 14, attrs: attrs{"allowzero": aInt(1)},
			in: []*value{i64(dims(0)), i64(dims(3), 0, 1<<40, 1<<40)}, err: "is empty, but its other dimensions multiply to more than 4294967296"},
		{name: "expand empty to a huge empty shape", op: "Expand", opset: 13, in: []*value{i64(dims(0, 1)), i64(dims(2), 0, 1<<40)},
			err: "shape (0, 1099511627776) is empty, but its other dimensions multiply to more than 4294967296"},
		{name: "tile an empty tensor many times", op: "Tile", opset: 13, in: []*value{i64(dims(0)), i64(dims(1), 1<<40)},
			want: []*value{i64(dims(0))}},
		{name: "constant of shape with negative dim", op: "ConstantOfShape", opset: 13, in: []*value{i64(dims(2), 3, lo)},
			err: "shape [3 -9223372036854775808] has negative dimension -9223372036854775808"},
		{name: "trilu k MinInt64", op: "Trilu", opset: 14, in: []*value{x, i64(dims(), lo)}, want: []*value{x}},
		{name: "trilu k MaxInt64 lower", op: "Trilu", opset: 14, attrs: attrs{"upper": aInt(0)}, in: []*value{x, i64(dims(), hi)},
			want: []*value{x}},
		{name: "shape start MinInt64 end MaxInt64", op: "Shape", opset: 15, attrs: attrs{"start": aInt(lo), "end": aInt(hi)},
			in: []*value{x}, want: []*value{i64(dims(2), 3, 2)}},
		{name: "gather index MinInt64", op: "Gather", opset: 13, in: []*value{x, i64(dims(1), lo)},
			err: "index -9223372036854775808 is out of range for axis 0 of size 3"},
		{name: "unsqueeze axis MinInt64", op: "Unsqueeze", opset: 13, in: []*value{x, i64(dims(1), lo)},
			err: "axis -9223372036854775808 is out of range for rank 3"},
	})
}
