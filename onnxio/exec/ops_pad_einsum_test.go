package exec

import "testing"

// TestPad checks every mode of Pad, the axes input and cropping.
func TestPad(t *testing.T) {
	x := i32(dims(2, 3), 1, 2, 3, 4, 5, 6)
	pads := func(p ...int64) *value { return i64(dims(len(p)), p...) }
	str := func(s string) attribute { return attribute{kind: attrString, s: s} }
	runOpCases(t, []opCase{
		{name: "constant", op: "Pad", opset: 11, in: []*value{x, pads(1, 0, 0, 1), i32(dims(), 9)}, want: []*value{i32(dims(3, 4), 9, 9, 9, 9, 1, 2, 3, 9, 4, 5, 6, 9)}},
		{name: "constant default zero", op: "Pad", opset: 13, in: []*value{f32(dims(2), 1, 2), pads(1, 1)}, want: []*value{f32(dims(4), 0, 1, 2, 0)}},
		{name: "reflect", op: "Pad", opset: 18, attrs: attrs{"mode": str("reflect")}, in: []*value{x, pads(0, 2, 0, 3)}, want: []*value{i32(dims(2, 8), 3, 2, 1, 2, 3, 2, 1, 2, 6, 5, 4, 5, 6, 5, 4, 5)}},
		{name: "reflect past the axis", op: "Pad", opset: 18, attrs: attrs{"mode": str("reflect")}, in: []*value{i32(dims(2), 1, 2), pads(5, 0)}, want: []*value{i32(dims(7), 2, 1, 2, 1, 2, 1, 2)}},
		{name: "edge", op: "Pad", opset: 11, attrs: attrs{"mode": str("edge")}, in: []*value{x, pads(1, 1, 0, 1)}, want: []*value{i32(dims(3, 5), 1, 1, 2, 3, 3, 1, 1, 2, 3, 3, 4, 4, 5, 6, 6)}},
		{name: "wrap", op: "Pad", opset: 19, attrs: attrs{"mode": str("wrap")}, in: []*value{x, pads(0, 4, 0, 1)}, want: []*value{i32(dims(2, 8), 3, 1, 2, 3, 1, 2, 3, 1, 6, 4, 5, 6, 4, 5, 6, 4)}},
		{name: "wrap before 19", op: "Pad", opset: 18, attrs: attrs{"mode": str("wrap")}, in: []*value{x, pads(0, 1, 0, 1)}, err: "mode wrap is defined from opset 19 on"},
		{name: "axes input", op: "Pad", opset: 18, in: []*value{x, pads(1, 2), i32(dims(), -1), i64(dims(1), -1)}, want: []*value{i32(dims(2, 6), -1, 1, 2, 3, -1, -1, -1, 4, 5, 6, -1, -1)}},
		{name: "negative pads crop", op: "Pad", opset: 11, in: []*value{x, pads(0, -1, -1, 1)}, want: []*value{i32(dims(1, 3), 2, 3, 0)}},
		{name: "attributes before 11", op: "Pad", opset: 2, attrs: attrs{"pads": aInts(0, 1, 0, 0), "value": aFloat(1.5)}, in: []*value{f32(dims(1, 1), 7)}, want: []*value{f32(dims(1, 2), 1.5, 7)}},
		{name: "pads length", op: "Pad", opset: 11, in: []*value{x, pads(1, 1)}, err: "2 pads for 2 axes, want 4"},
		{name: "crop below zero", op: "Pad", opset: 11, in: []*value{x, pads(-2, 0, -1, 0)}, err: "gives size -1"},
	})
}

// TestEinsum checks Einsum against products worked out by hand: matrix
// products, transposes, traces and diagonals, ellipsis broadcasting,
// outer products, full contractions and chains of three operands.
func TestEinsum(t *testing.T) {
	a := i64(dims(2, 3), 0, 1, 2, 3, 4, 5)
	b := i64(dims(3, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
	sq := i64(dims(3, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8)
	m := i64(dims(2, 2), 0, 1, 2, 3)
	eq := func(s string) attrs { return attrs{"equation": {kind: attrString, s: s}} }
	runOpCases(t, []opCase{
		{name: "implicit matmul", op: "Einsum", opset: 12, attrs: eq("ij,jk"), in: []*value{a, b}, want: []*value{i64(dims(2, 4), 20, 23, 26, 29, 56, 68, 80, 92)}},
		{name: "explicit matmul float32", op: "Einsum", opset: 12, attrs: eq("ij, jk -> ik"), in: []*value{castValue(a, Float32), castValue(b, Float32)}, want: []*value{f32(dims(2, 4), 20, 23, 26, 29, 56, 68, 80, 92)}},
		{name: "implicit transpose", op: "Einsum", opset: 12, attrs: eq("ji"), in: []*value{a}, want: []*value{i64(dims(3, 2), 0, 3, 1, 4, 2, 5)}},
		{name: "implicit order is ASCII", op: "Einsum", opset: 12, attrs: eq("aB"), in: []*value{a}, want: []*value{i64(dims(3, 2), 0, 3, 1, 4, 2, 5)}},
		{name: "diagonal", op: "Einsum", opset: 12, attrs: eq("ii->i"), in: []*value{sq}, want: []*value{i64(dims(3), 0, 4, 8)}},
		{name: "trace", op: "Einsum", opset: 12, attrs: eq("ii"), in: []*value{sq}, want: []*value{i64(dims(), 12)}},
		{name: "ellipsis broadcast", op: "Einsum", opset: 12, attrs: eq("...ij,...jk->...ik"), in: []*value{i64(dims(2, 2, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), i64(dims(3, 2), 0, 1, 2, 3, 4, 5)},
			want: []*value{i64(dims(2, 2, 2), 10, 13, 28, 40, 46, 67, 64, 94)}},
		{name: "batched float64", op: "Einsum", opset: 12, attrs: eq("bij,bjk->bik"), in: []*value{castValue(i64(dims(2, 2, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), Float64), castValue(i64(dims(2, 3, 2), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), Float64)},
			want: []*value{f64(dims(2, 2, 2), 10, 13, 28, 40, 172, 193, 244, 274)}},
		{name: "outer product of three", op: "Einsum", opset: 12, attrs: eq("i,j,k->ijk"), in: []*value{i32(dims(2), 1, 2), i32(dims(2), 3, 4), i32(dims(2), 5, 6)}, want: []*value{i32(dims(2, 2, 2), 15, 18, 20, 24, 30, 36, 40, 48)}},
		{name: "full contraction", op: "Einsum", opset: 12, attrs: eq("ij,ij->"), in: []*value{a, a}, want: []*value{i64(dims(), 55)}},
		{name: "dot implicit", op: "Einsum", opset: 12, attrs: eq("i,i"), in: []*value{i64(dims(3), 1, 2, 3), i64(dims(3), 4, 5, 6)}, want: []*value{i64(dims(), 32)}},
		{name: "chain of three", op: "Einsum", opset: 12, attrs: eq("ij,jk,kl->il"), in: []*value{m, m, m}, want: []*value{i64(dims(2, 2), 6, 11, 22, 39)}},
		{name: "ellipsis row dots", op: "Einsum", opset: 12, attrs: eq("...i,...i->..."), in: []*value{i64(dims(2, 3), 0, 1, 2, 3, 4, 5), i64(dims(3), 0, 1, 2)}, want: []*value{i64(dims(2), 5, 14)}},
		{name: "sum over a free label", op: "Einsum", opset: 12, attrs: eq("ij->j"), in: []*value{a}, want: []*value{i64(dims(3), 3, 5, 7)}},
		{name: "size mismatch", op: "Einsum", opset: 12, attrs: eq("ij,jk"), in: []*value{a, a}, err: "label j has sizes 3 and 2"},
		{name: "rank mismatch", op: "Einsum", opset: 12, attrs: eq("ijk"), in: []*value{a}, err: "3 letters for rank 2"},
		{name: "unknown output label", op: "Einsum", opset: 12, attrs: eq("ij->k"), in: []*value{a}, err: "output label k appears in no operand"},
	})
}
