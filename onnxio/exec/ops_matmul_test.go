package exec

import "testing"

func TestMatMul(t *testing.T) {
	a := f32(dims(2, 3), 1, 2, 3, 4, 5, 6)
	b := f32(dims(3, 2), 1, 2, 3, 4, 5, 6)
	runOpCases(t, []opCase{
		{name: "2-D", op: "MatMul", opset: 13, in: []*value{a, b}, want: []*value{f32(dims(2, 2), 22, 28, 49, 64)}},
		{name: "vector dot vector", op: "MatMul", opset: 13,
			in: []*value{f32(dims(3), 1, 2, 3), f32(dims(3), 4, 5, 6)}, want: []*value{f32(dims(), 32)}},
		{name: "vector times matrix", op: "MatMul", opset: 13,
			in: []*value{f32(dims(3), 1, 2, 3), b}, want: []*value{f32(dims(2), 22, 28)}},
		{name: "matrix times vector", op: "MatMul", opset: 13,
			in: []*value{a, f32(dims(3), 1, 1, 1)}, want: []*value{f32(dims(2), 6, 15)}},
		{name: "batch times shared matrix", op: "MatMul", opset: 13,
			in:   []*value{f32(dims(2, 2, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12), b},
			want: []*value{f32(dims(2, 2, 2), 22, 28, 49, 64, 76, 100, 103, 136)}},
		{name: "shared matrix times batch", op: "MatMul", opset: 13,
			in:   []*value{a, f32(dims(2, 3, 2), 1, 2, 3, 4, 5, 6, 2, 4, 6, 8, 10, 12)},
			want: []*value{f32(dims(2, 2, 2), 22, 28, 49, 64, 44, 56, 98, 128)}},
		{name: "batch broadcasting both ways", op: "MatMul", opset: 13,
			// a: (2,1,2,2) = [I, 2I]; b: (3,2,2); result[i][j] = a[i]·b[j].
			in: []*value{f32(dims(2, 1, 2, 2), 1, 0, 0, 1, 2, 0, 0, 2),
				f32(dims(3, 2, 2), 1, 2, 3, 4, 0, 1, 1, 0, 1, 1, 1, 1)},
			want: []*value{f32(dims(2, 3, 2, 2),
				1, 2, 3, 4, 0, 1, 1, 0, 1, 1, 1, 1,
				2, 4, 6, 8, 0, 2, 2, 0, 2, 2, 2, 2)}},
		{name: "vector times batch", op: "MatMul", opset: 13,
			in:   []*value{f32(dims(2), 1, 1), f32(dims(2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8)},
			want: []*value{f32(dims(2, 2), 4, 6, 12, 14)}},
		{name: "int64", op: "MatMul", opset: 13,
			in: []*value{i64(dims(1, 2), 1, 2), i64(dims(2, 1), 3, 4)}, want: []*value{i64(dims(1, 1), 11)}},
		{name: "float64", op: "MatMul", opset: 13,
			in: []*value{f64(dims(1, 2), 1, 2), f64(dims(2, 1), 3, 4)}, want: []*value{f64(dims(1, 1), 11)}},
		{name: "inner dimensions differ", op: "MatMul", opset: 13, in: []*value{a, a},
			err: "shapes (2, 3) and (2, 3) cannot be multiplied"},
		{name: "batches do not broadcast", op: "MatMul", opset: 13,
			in:  []*value{f32(dims(2, 1, 1), 1, 2), f32(dims(3, 1, 1), 1, 2, 3)},
			err: "batch dimensions: shapes (2,) and (3,) do not broadcast"},
		{name: "scalar operand", op: "MatMul", opset: 13, in: []*value{f32(dims(), 1), a}, err: "rank >= 1"},
	})
}

func TestGemm(t *testing.T) {
	a := f32(dims(3, 2), 1, 2, 3, 4, 5, 6)
	aT := f32(dims(2, 3), 1, 3, 5, 2, 4, 6)
	b := f32(dims(2, 4), 1, 0, -1, 2, 0.5, 1, 1, -1)
	bT := f32(dims(4, 2), 1, 0.5, 0, 1, -1, 1, 2, -1)
	c := f32(dims(4), 1, 2, 3, 4)
	// 0.5·A·B + 2·C, from numpy.
	want := f32(dims(3, 4), 3, 5, 6.5, 8, 4.5, 6, 6.5, 9, 6, 7, 6.5, 10)
	ab := f32(dims(3, 4), 2, 2, 1, 0, 5, 4, 1, 2, 8, 6, 1, 4)
	ab1 := f32(dims(3, 4), 3, 3, 2, 1, 6, 5, 2, 3, 9, 7, 2, 5)
	scaled := attrs{"alpha": aFloat(0.5), "beta": aFloat(2)}
	runOpCases(t, []opCase{
		{name: "alpha beta row bias", op: "Gemm", opset: 13, attrs: scaled, in: []*value{a, b, c}, want: []*value{want}},
		{name: "transA", op: "Gemm", opset: 13, attrs: attrs{"alpha": aFloat(0.5), "beta": aFloat(2), "transA": aInt(1)},
			in: []*value{aT, b, c}, want: []*value{want}},
		{name: "transB", op: "Gemm", opset: 13, attrs: attrs{"alpha": aFloat(0.5), "beta": aFloat(2), "transB": aInt(1)},
			in: []*value{a, bT, c}, want: []*value{want}},
		{name: "both transposed", op: "Gemm", opset: 13, attrs: attrs{"alpha": aFloat(0.5), "beta": aFloat(2), "transA": aInt(1), "transB": aInt(1)},
			in: []*value{aT, bT, c}, want: []*value{want}},
		{name: "no C", op: "Gemm", opset: 13, in: []*value{a, b}, want: []*value{ab}},
		{name: "scalar C", op: "Gemm", opset: 13, in: []*value{a, b, f32(dims(), 1)}, want: []*value{ab1}},
		{name: "column C", op: "Gemm", opset: 13, in: []*value{a, b, f32(dims(3, 1), 1, 1, 1)}, want: []*value{ab1}},
		// m = n: a column of C must not be read as a row of bias.
		{name: "column C, square result", op: "Gemm", opset: 13,
			in:   []*value{f32(dims(2, 2), 1, 2, 3, 4), f32(dims(2, 2), 1, 0, 0, 1), f32(dims(2, 1), 10, 20)},
			want: []*value{f32(dims(2, 2), 11, 12, 23, 24)}},
		{name: "row C, square result", op: "Gemm", opset: 13,
			in:   []*value{f32(dims(2, 2), 1, 2, 3, 4), f32(dims(2, 2), 1, 0, 0, 1), f32(dims(1, 2), 10, 20)},
			want: []*value{f32(dims(2, 2), 11, 22, 13, 24)}},
		{name: "C does not broadcast", op: "Gemm", opset: 13, in: []*value{a, b, f32(dims(2), 1, 1)},
			err: "C of shape (2,) does not broadcast to the (3, 4) result"},
		{name: "inner dimensions differ", op: "Gemm", opset: 13, in: []*value{a, a}, err: "inner dimensions differ"},
		{name: "int64", op: "Gemm", opset: 13, attrs: attrs{"transB": aInt(1)},
			in:   []*value{i64(dims(1, 2), 1, 2), i64(dims(1, 2), 3, 4), i64(dims(1, 1), 1)},
			want: []*value{i64(dims(1, 1), 12)}},
	})
}
