package exec

import "testing"

func TestTransposeReshapeFlatten(t *testing.T) {
	x := f32(dims(2, 3), 1, 2, 3, 4, 5, 6)
	cube := f32(dims(2, 2, 2), 0, 1, 2, 3, 4, 5, 6, 7)
	runOpCases(t, []opCase{
		{name: "transpose default reverses", op: "Transpose", opset: 13, in: []*value{x},
			want: []*value{f32(dims(3, 2), 1, 4, 2, 5, 3, 6)}},
		{name: "transpose perm", op: "Transpose", opset: 13, attrs: attrs{"perm": aInts(1, 0, 2)}, in: []*value{cube},
			want: []*value{f32(dims(2, 2, 2), 0, 1, 4, 5, 2, 3, 6, 7)}},
		{name: "transpose heads", op: "Transpose", opset: 13, attrs: attrs{"perm": aInts(0, 2, 1)}, in: []*value{cube},
			want: []*value{f32(dims(2, 2, 2), 0, 2, 1, 3, 4, 6, 5, 7)}},
		{name: "transpose bad perm", op: "Transpose", opset: 13, attrs: attrs{"perm": aInts(0, 0)}, in: []*value{x},
			err: "appears twice"},
		{name: "reshape infers -1", op: "Reshape", opset: 14, in: []*value{x, i64(dims(2), 3, -1)},
			want: []*value{f32(dims(3, 2), 1, 2, 3, 4, 5, 6)}},
		{name: "reshape 0 copies", op: "Reshape", opset: 14, in: []*value{x, i64(dims(3), 0, 0, -1)},
			want: []*value{f32(dims(2, 3, 1), 1, 2, 3, 4, 5, 6)}},
		{name: "reshape allowzero", op: "Reshape", opset: 14, attrs: attrs{"allowzero": aInt(1)},
			in: []*value{f32(dims(0, 3)), i64(dims(2), 3, 0)}, want: []*value{f32(dims(3, 0))}},
		{name: "reshape allowzero keeps 0 literal", op: "Reshape", opset: 14, attrs: attrs{"allowzero": aInt(1)},
			in: []*value{x, i64(dims(2), 0, 6)}, err: "cannot reshape (2, 3) (6 elements) to [0 6] (0 elements)"},
		{name: "reshape impossible", op: "Reshape", opset: 14, in: []*value{x, i64(dims(2), 4, -1)},
			err: "cannot reshape (2, 3) (6 elements) to [4 -1]"},
		{name: "reshape two -1", op: "Reshape", opset: 14, in: []*value{x, i64(dims(2), -1, -1)}, err: "more than one -1"},
		{name: "reshape 0 beyond rank", op: "Reshape", opset: 14, in: []*value{x, i64(dims(4), 1, 1, 1, 0)},
			err: "copies dimension 3"},
		{name: "reshape huge", op: "Reshape", opset: 14, in: []*value{x, i64(dims(2), 1<<40, 1<<40)}, err: "cannot reshape (2, 3) (6 elements) to [1099511627776 1099511627776] (too many elements)"},
		{name: "flatten axis 2", op: "Flatten", opset: 13, attrs: attrs{"axis": aInt(2)}, in: []*value{f32(dims(2, 3, 4))},
			want: []*value{f32(dims(6, 4))}},
		{name: "flatten axis 0", op: "Flatten", opset: 13, attrs: attrs{"axis": aInt(0)}, in: []*value{f32(dims(2, 3, 4))},
			want: []*value{f32(dims(1, 24))}},
		{name: "flatten default", op: "Flatten", opset: 13, in: []*value{x}, want: []*value{x}},
		{name: "flatten axis -1", op: "Flatten", opset: 13, attrs: attrs{"axis": aInt(-1)}, in: []*value{f32(dims(2, 3, 4))},
			want: []*value{f32(dims(6, 4))}},
		{name: "flatten axis out of range", op: "Flatten", opset: 13, attrs: attrs{"axis": aInt(4)}, in: []*value{f32(dims(2, 3, 4))},
			err: "axis 4 is out of range"},
	})
}

// zeros makes an all-zero float32 value, for shape-only tests.
func zeros(shape ...int) *value { return newValue(Float32, shape) }

func TestShapeSizeSqueeze(t *testing.T) {
	x := zeros(2, 3, 4)
	runOpCases(t, []opCase{
		{name: "shape", op: "Shape", opset: 13, in: []*value{x}, want: []*value{i64(dims(3), 2, 3, 4)}},
		{name: "shape start", op: "Shape", opset: 15, attrs: attrs{"start": aInt(1)}, in: []*value{x}, want: []*value{i64(dims(2), 3, 4)}},
		{name: "shape negative end", op: "Shape", opset: 15, attrs: attrs{"end": aInt(-1)}, in: []*value{x}, want: []*value{i64(dims(2), 2, 3)}},
		{name: "shape clamps", op: "Shape", opset: 15, attrs: attrs{"start": aInt(-10), "end": aInt(10)}, in: []*value{x},
			want: []*value{i64(dims(3), 2, 3, 4)}},
		{name: "shape empty range", op: "Shape", opset: 15, attrs: attrs{"start": aInt(2), "end": aInt(1)}, in: []*value{x},
			want: []*value{i64(dims(0))}},
		{name: "size", op: "Size", opset: 13, in: []*value{x}, want: []*value{i64(dims(), 24)}},
		{name: "unsqueeze attribute", op: "Unsqueeze", opset: 11, attrs: attrs{"axes": aInts(0, 3)}, in: []*value{zeros(2, 3)},
			want: []*value{zeros(1, 2, 3, 1)}},
		{name: "unsqueeze input", op: "Unsqueeze", opset: 13, in: []*value{zeros(2, 3), i64(dims(1), -1)},
			want: []*value{zeros(2, 3, 1)}},
		{name: "unsqueeze scalar", op: "Unsqueeze", opset: 13, in: []*value{f32(dims(), 5), i64(dims(1), 0)},
			want: []*value{f32(dims(1), 5)}},
		{name: "unsqueeze repeated axis", op: "Unsqueeze", opset: 13, in: []*value{zeros(2), i64(dims(2), 0, -3)},
			err: "appears twice"},
		{name: "unsqueeze without axes", op: "Unsqueeze", opset: 13, in: []*value{zeros(2)}, err: "axes are required"},
		{name: "squeeze input", op: "Squeeze", opset: 13, in: []*value{zeros(1, 3, 1), i64(dims(1), 0)}, want: []*value{zeros(3, 1)}},
		{name: "squeeze all ones", op: "Squeeze", opset: 13, in: []*value{zeros(1, 3, 1)}, want: []*value{zeros(3)}},
		{name: "squeeze attribute", op: "Squeeze", opset: 11, attrs: attrs{"axes": aInts(-1)}, in: []*value{zeros(1, 3, 1)},
			want: []*value{zeros(1, 3)}},
		{name: "squeeze non-1 axis", op: "Squeeze", opset: 13, in: []*value{zeros(1, 3, 1), i64(dims(1), 1)},
			err: "cannot squeeze axis 1 of size 3"},
	})
}

func TestConcatSliceSplit(t *testing.T) {
	grid := f32(dims(3, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
	one := func(v int64) *value { return i64(dims(1), v) }
	line := f32(dims(7), 1, 2, 3, 4, 5, 6, 7)
	runOpCases(t, []opCase{
		{name: "concat axis 1", op: "Concat", opset: 13, attrs: attrs{"axis": aInt(1)},
			in:   []*value{f32(dims(2, 1), 1, 2), f32(dims(2, 2), 3, 4, 5, 6)},
			want: []*value{f32(dims(2, 3), 1, 3, 4, 2, 5, 6)}},
		{name: "concat axis -2 with empty", op: "Concat", opset: 13, attrs: attrs{"axis": aInt(-2)},
			in:   []*value{f32(dims(1, 2), 1, 2), f32(dims(0, 2)), f32(dims(1, 2), 3, 4)},
			want: []*value{f32(dims(2, 2), 1, 2, 3, 4)}},
		{name: "concat int64 shapes", op: "Concat", opset: 13, attrs: attrs{"axis": aInt(0)},
			in: []*value{i64(dims(1), 2), i64(dims(2), -1, 8)}, want: []*value{i64(dims(3), 2, -1, 8)}},
		{name: "concat mismatched", op: "Concat", opset: 13, attrs: attrs{"axis": aInt(1)},
			in: []*value{zeros(2, 1), zeros(3, 1)}, err: "differ outside axis 1"},

		{name: "slice clamps end", op: "Slice", opset: 13, in: []*value{grid, one(1), one(100), one(1)},
			want: []*value{f32(dims(3, 3), 1, 2, 3, 5, 6, 7, 9, 10, 11)}},
		{name: "slice reverses rows", op: "Slice", opset: 13, in: []*value{grid, one(-1), one(-100), one(0), one(-1)},
			want: []*value{f32(dims(3, 4), 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3)}},
		{name: "slice step -2", op: "Slice", opset: 13, in: []*value{grid, one(100), one(-100), one(-1), one(-2)},
			want: []*value{f32(dims(3, 2), 3, 1, 7, 5, 11, 9)}},
		{name: "slice step 2 from negative start", op: "Slice", opset: 13, in: []*value{grid, one(-4), one(4), one(1), one(2)},
			want: []*value{f32(dims(3, 2), 0, 2, 4, 6, 8, 10)}},
		{name: "slice start past end is empty", op: "Slice", opset: 13, in: []*value{grid, one(5), one(10), one(0)},
			want: []*value{f32(dims(0, 4))}},
		{name: "slice default axes", op: "Slice", opset: 13, in: []*value{grid, i64(dims(2), 0, 1), i64(dims(2), 2, 3)},
			want: []*value{f32(dims(2, 2), 1, 2, 5, 6)}},
		{name: "slice int32 inputs", op: "Slice", opset: 13, in: []*value{grid, i32(dims(1), 1), i32(dims(1), 2)},
			want: []*value{f32(dims(1, 4), 4, 5, 6, 7)}},
		{name: "slice attributes before 10", op: "Slice", opset: 9, attrs: attrs{"starts": aInts(1), "ends": aInts(3), "axes": aInts(0)},
			in: []*value{grid}, want: []*value{f32(dims(2, 4), 4, 5, 6, 7, 8, 9, 10, 11)}},
		{name: "slice step 0", op: "Slice", opset: 13, in: []*value{grid, one(0), one(1), one(0), one(0)}, err: "step is 0"},

		{name: "split sizes input", op: "Split", opset: 13, in: []*value{line, i64(dims(2), 3, 4)},
			want: []*value{f32(dims(3), 1, 2, 3), f32(dims(4), 4, 5, 6, 7)}},
		{name: "split sizes attribute", op: "Split", opset: 11, attrs: attrs{"split": aInts(1, 2, 4)}, in: []*value{line},
			want: []*value{f32(dims(1), 1), f32(dims(2), 2, 3), f32(dims(4), 4, 5, 6, 7)}},
		{name: "split equal parts", op: "Split", opset: 13, attrs: attrs{"axis": aInt(1)}, in: []*value{grid}, outs: 2,
			want: []*value{f32(dims(3, 2), 0, 1, 4, 5, 8, 9), f32(dims(3, 2), 2, 3, 6, 7, 10, 11)}},
		{name: "split num_outputs", op: "Split", opset: 18, attrs: attrs{"num_outputs": aInt(3)}, in: []*value{line},
			want: []*value{f32(dims(3), 1, 2, 3), f32(dims(3), 4, 5, 6), f32(dims(1), 7)}},
		{name: "split uneven without sizes", op: "Split", opset: 13, in: []*value{line}, outs: 2,
			err: "does not split into 2 equal parts"},
		{name: "split sizes do not add up", op: "Split", opset: 13, in: []*value{line, i64(dims(2), 3, 3)}, outs: 2,
			err: "add up to 6"},
	})
}

func TestGatherExpandTile(t *testing.T) {
	x := f32(dims(3, 2), 1, 2, 3, 4, 5, 6)
	runOpCases(t, []opCase{
		{name: "gather negative index", op: "Gather", opset: 13, in: []*value{x, i64(dims(2), 2, -3)},
			want: []*value{f32(dims(2, 2), 5, 6, 1, 2)}},
		{name: "gather scalar index axis 1", op: "Gather", opset: 13, attrs: attrs{"axis": aInt(1)},
			in: []*value{x, i64(dims(), -1)}, want: []*value{f32(dims(3), 2, 4, 6)}},
		{name: "gather 2-D int32 indices", op: "Gather", opset: 13, in: []*value{x, i32(dims(2, 2), 0, 1, 1, 0)},
			want: []*value{f32(dims(2, 2, 2), 1, 2, 3, 4, 3, 4, 1, 2)}},
		{name: "gather embedding rows", op: "Gather", opset: 13, in: []*value{x, i64(dims(1, 3), 1, 1, 0)},
			want: []*value{f32(dims(1, 3, 2), 3, 4, 3, 4, 1, 2)}},
		{name: "gather index out of range", op: "Gather", opset: 13, in: []*value{x, i64(dims(1), 3)},
			err: "index 3 is out of range for axis 0 of size 3"},
		{name: "gather float indices", op: "Gather", opset: 13, in: []*value{x, f32(dims(1), 0)}, err: "indices"},

		{name: "expand both ways", op: "Expand", opset: 13, in: []*value{f32(dims(3, 1), 1, 2, 3), i64(dims(3), 2, 1, 2)},
			want: []*value{f32(dims(2, 3, 2), 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3)}},
		{name: "expand to smaller shape", op: "Expand", opset: 13, in: []*value{f32(dims(3, 1), 1, 2, 3), i64(dims(1), 1)},
			want: []*value{f32(dims(3, 1), 1, 2, 3)}},
		{name: "expand mismatch", op: "Expand", opset: 13, in: []*value{f32(dims(3), 1, 2, 3), i64(dims(1), 2)},
			err: "do not broadcast"},

		{name: "tile rows", op: "Tile", opset: 13, in: []*value{f32(dims(2, 2), 1, 2, 3, 4), i64(dims(2), 2, 1)},
			want: []*value{f32(dims(4, 2), 1, 2, 3, 4, 1, 2, 3, 4)}},
		{name: "tile columns", op: "Tile", opset: 13, in: []*value{f32(dims(2, 2), 1, 2, 3, 4), i64(dims(2), 1, 2)},
			want: []*value{f32(dims(2, 4), 1, 2, 1, 2, 3, 4, 3, 4)}},
		{name: "tile wrong count", op: "Tile", opset: 13, in: []*value{f32(dims(2), 1, 2), i64(dims(2), 1, 2)},
			err: "2 repeats for rank 1"},
	})
}

func TestGenerators(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "range int64", op: "Range", opset: 11, in: []*value{i64(dims(), 0), i64(dims(), 10), i64(dims(), 3)},
			want: []*value{i64(dims(4), 0, 3, 6, 9)}},
		{name: "range float32", op: "Range", opset: 11, in: []*value{f32(dims(), 1), f32(dims(), 2), f32(dims(), 0.25)},
			want: []*value{f32(dims(4), 1, 1.25, 1.5, 1.75)}},
		{name: "range negative delta", op: "Range", opset: 11, in: []*value{i32(dims(), 10), i32(dims(), 4), i32(dims(), -3)},
			want: []*value{i32(dims(2), 10, 7)}},
		{name: "range empty", op: "Range", opset: 11, in: []*value{i64(dims(), 5), i64(dims(), 1), i64(dims(), 1)},
			want: []*value{i64(dims(0))}},
		{name: "range zero delta", op: "Range", opset: 11, in: []*value{i64(dims(), 0), i64(dims(), 1), i64(dims(), 0)},
			err: "delta is 0"},
		{name: "range too long", op: "Range", opset: 11, in: []*value{i64(dims(), 0), i64(dims(), 1<<40), i64(dims(), 1)},
			err: "int64 (1099511627776,) needs 8 TiB, over the memory budget of 4 GiB"},

		{name: "constant of shape", op: "ConstantOfShape", opset: 9, attrs: attrs{"value": aTensor(i64(dims(1), 7))},
			in: []*value{i64(dims(2), 2, 3)}, want: []*value{i64(dims(2, 3), 7, 7, 7, 7, 7, 7)}},
		{name: "constant of shape default", op: "ConstantOfShape", opset: 9, in: []*value{i64(dims(1), 2)},
			want: []*value{f32(dims(2), 0, 0)}},
		{name: "constant of empty shape is a scalar", op: "ConstantOfShape", opset: 9,
			attrs: attrs{"value": aTensor(bools(dims(1), true))}, in: []*value{i64(dims(0))}, want: []*value{bools(dims(), true)}},
		{name: "constant of negative shape", op: "ConstantOfShape", opset: 9, in: []*value{i64(dims(1), -2)},
			err: "shape [-2] has negative dimension -2"},

		{name: "constant tensor", op: "Constant", opset: 13, attrs: attrs{"value": aTensor(f32(dims(2), 1, 2))},
			want: []*value{f32(dims(2), 1, 2)}},
		{name: "constant value_ints", op: "Constant", opset: 13, attrs: attrs{"value_ints": aInts(1, 2)},
			want: []*value{i64(dims(2), 1, 2)}},
		{name: "constant value_int", op: "Constant", opset: 13, attrs: attrs{"value_int": aInt(4)},
			want: []*value{i64(dims(), 4)}},
		{name: "constant value_float", op: "Constant", opset: 13, attrs: attrs{"value_float": aFloat(1.5)},
			want: []*value{f32(dims(), 1.5)}},
		{name: "constant value_floats", op: "Constant", opset: 13, attrs: attrs{"value_floats": aFloats(1.5, 2)},
			want: []*value{f32(dims(2), 1.5, 2)}},
		{name: "constant string", op: "Constant", opset: 13, attrs: attrs{"value_string": {kind: attrString, s: "x"}},
			err: "value_string is not supported"},

		{name: "triu", op: "Trilu", opset: 14, in: []*value{f32(dims(3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9)},
			want: []*value{f32(dims(3, 3), 1, 2, 3, 0, 5, 6, 0, 0, 9)}},
		{name: "tril below the diagonal", op: "Trilu", opset: 14, attrs: attrs{"upper": aInt(0)},
			in:   []*value{f32(dims(3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9), i64(dims(), -1)},
			want: []*value{f32(dims(3, 3), 0, 0, 0, 4, 0, 0, 7, 8, 0)}},
		{name: "triu batched k=1", op: "Trilu", opset: 14,
			in:   []*value{i64(dims(2, 2, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12), i64(dims(), 1)},
			want: []*value{i64(dims(2, 2, 3), 0, 2, 3, 0, 0, 6, 0, 8, 9, 0, 0, 12)}},
		{name: "tril of ones is a causal mask", op: "Trilu", opset: 14, attrs: attrs{"upper": aInt(0)},
			in:   []*value{bools(dims(2, 3), true, true, true, true, true, true)},
			want: []*value{bools(dims(2, 3), true, false, false, true, true, false)}},
		{name: "trilu of a vector", op: "Trilu", opset: 14, in: []*value{f32(dims(2), 1, 2)}, err: "rank >= 2"},

		{name: "dropout inference with mask", op: "Dropout", opset: 13, in: []*value{f32(dims(2), 1, 2), f32(dims(), 0.5)},
			want: []*value{f32(dims(2), 1, 2), bools(dims(2), true, true)}},
		{name: "dropout opset 7 mask has the input type", op: "Dropout", opset: 7, attrs: attrs{"ratio": aFloat(0.3)},
			in: []*value{f32(dims(2), 1, 2)}, want: []*value{f32(dims(2), 1, 2), f32(dims(2), 1, 1)}},
		{name: "dropout training ratio 0", op: "Dropout", opset: 13,
			in:   []*value{f32(dims(2), 1, 2), f32(dims(), 0), bools(dims(), true)},
			want: []*value{f32(dims(2), 1, 2)}},
		{name: "dropout training", op: "Dropout", opset: 13,
			in: []*value{f32(dims(2), 1, 2), f32(dims(), 0.1), bools(dims(), true)}, err: "training-mode Dropout"},
	})
}
