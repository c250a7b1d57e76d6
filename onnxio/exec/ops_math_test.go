package exec

import (
	"math"
	"testing"
)

func u8(shape []int, data ...uint8) *value   { return valueOf(shape, data) }
func u16(shape []int, data ...uint16) *value { return valueOf(shape, data) }

// TestMathOps checks the elementwise math of ops_math.go on values worked
// out by hand.
func TestMathOps(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	runOpCases(t, []opCase{
		// Mod: fmod 0 takes the divisor's sign (Python's %), fmod 1 the dividend's (C's fmod).
		{name: "mod floored", op: "Mod", opset: 13, in: []*value{i32(dims(4), 7, -7, 7, -7), i32(dims(4), 3, 3, -3, -3)}, want: []*value{i32(dims(4), 1, 2, -2, -1)}},
		{name: "mod fmod", op: "Mod", opset: 13, attrs: attrs{"fmod": aInt(1)}, in: []*value{i64(dims(4), 7, -7, 7, -7), i64(dims(4), 3, 3, -3, -3)}, want: []*value{i64(dims(4), 1, -1, 1, -1)}},
		{name: "mod float", op: "Mod", opset: 10, attrs: attrs{"fmod": aInt(1)}, in: []*value{f32(dims(3), 5.5, -5.5, 5.5), f32(dims(1), 2)}, want: []*value{f32(dims(3), 1.5, -1.5, 1.5)}},
		{name: "mod uint8 broadcast", op: "Mod", opset: 13, in: []*value{u8(dims(2, 2), 10, 11, 12, 13), u8(dims(2), 4, 5)}, want: []*value{u8(dims(2, 2), 2, 1, 0, 3)}},
		{name: "mod float needs fmod", op: "Mod", opset: 13, in: []*value{f32(dims(1), 1), f32(dims(1), 2)}, err: "fmod must be 1"},
		{name: "mod by zero", op: "Mod", opset: 13, in: []*value{i32(dims(1), 1), i32(dims(1), 0)}, err: "integer modulo by zero"},
		{name: "sign", op: "Sign", opset: 13, in: []*value{f32(dims(4), -2.5, 0, 3, nan)}, want: []*value{f32(dims(4), -1, 0, 1, nan)}},
		{name: "sign int8", op: "Sign", opset: 13, in: []*value{valueOf(dims(3), []int8{-128, 0, 127})}, want: []*value{valueOf(dims(3), []int8{-1, 0, 1})}},
		{name: "floor", op: "Floor", opset: 13, in: []*value{f32(dims(3), -1.5, 1.5, 2)}, want: []*value{f32(dims(3), -2, 1, 2)}},
		{name: "ceil", op: "Ceil", opset: 13, in: []*value{f32(dims(3), -1.5, 1.5, 2)}, want: []*value{f32(dims(3), -1, 2, 2)}},
		{name: "round half to even", op: "Round", opset: 22, in: []*value{f32(dims(6), 0.5, 1.5, 2.5, -0.5, -1.5, 2.4)}, want: []*value{f32(dims(6), 0, 2, 2, 0, -2, 2)}},
		{name: "tan", op: "Tan", opset: 7, in: []*value{f32(dims(2), 0, math.Pi/4)}, want: []*value{f32(dims(2), 0, 1)}},
		{name: "asin acos atan", op: "Asin", opset: 7, in: []*value{f64(dims(2), 1, 0.5)}, want: []*value{f64(dims(2), math.Pi/2, math.Pi/6)}},
		{name: "acos", op: "Acos", opset: 7, in: []*value{f64(dims(2), 0, 0.5)}, want: []*value{f64(dims(2), math.Pi/2, math.Pi/3)}},
		{name: "atan", op: "Atan", opset: 7, in: []*value{f64(dims(1), 1)}, want: []*value{f64(dims(1), math.Pi/4)}},
		{name: "sinh cosh", op: "Sinh", opset: 9, in: []*value{f64(dims(1), 1)}, want: []*value{f64(dims(1), (math.E-1/math.E)/2)}},
		{name: "cosh", op: "Cosh", opset: 9, in: []*value{f64(dims(1), 1)}, want: []*value{f64(dims(1), (math.E+1/math.E)/2)}},
		{name: "asinh acosh atanh", op: "Asinh", opset: 9, in: []*value{f64(dims(1), 0.75)}, want: []*value{f64(dims(1), math.Log(2))}},
		{name: "acosh", op: "Acosh", opset: 9, in: []*value{f64(dims(1), 1.25)}, want: []*value{f64(dims(1), math.Log(2))}},
		{name: "atanh", op: "Atanh", opset: 9, in: []*value{f64(dims(1), 0.6)}, want: []*value{f64(dims(1), math.Log(2))}},
		{name: "isinf", op: "IsInf", opset: 20, in: []*value{f32(dims(4), -inf, inf, nan, 1)}, want: []*value{bools(dims(4), true, true, false, false)}},
		{name: "isinf negative only", op: "IsInf", opset: 10, attrs: attrs{"detect_positive": aInt(0)}, in: []*value{f32(dims(2), -inf, inf)}, want: []*value{bools(dims(2), true, false)}},
		{name: "bitshift left", op: "BitShift", opset: 11, attrs: attrs{"direction": {kind: attrString, s: "LEFT"}}, in: []*value{u8(dims(3), 1, 3, 128), u8(dims(3), 3, 2, 1)}, want: []*value{u8(dims(3), 8, 12, 0)}},
		{name: "bitshift right", op: "BitShift", opset: 11, attrs: attrs{"direction": {kind: attrString, s: "RIGHT"}}, in: []*value{u16(dims(2), 256, 7), u16(dims(1), 2)}, want: []*value{u16(dims(2), 64, 1)}},
		{name: "bitshift signed refused", op: "BitShift", opset: 11, attrs: attrs{"direction": {kind: attrString, s: "LEFT"}}, in: []*value{i32(dims(1), 1), i32(dims(1), 1)}, err: "want uint8, uint16, uint32 or uint64"},
		{name: "bitwise and", op: "BitwiseAnd", opset: 18, in: []*value{i32(dims(2), 12, -1), i32(dims(2), 10, 6)}, want: []*value{i32(dims(2), 8, 6)}},
		{name: "bitwise or", op: "BitwiseOr", opset: 18, in: []*value{u8(dims(2), 12, 240), u8(dims(1), 3)}, want: []*value{u8(dims(2), 15, 243)}},
		{name: "bitwise xor", op: "BitwiseXor", opset: 18, in: []*value{valueOf(dims(2), []int8{12, -1}), valueOf(dims(2), []int8{10, 1})}, want: []*value{valueOf(dims(2), []int8{6, -2})}},
		{name: "bitwise not", op: "BitwiseNot", opset: 18, in: []*value{valueOf(dims(3), []int16{0, 5, -1})}, want: []*value{valueOf(dims(3), []int16{-1, -6, 0})}},
		{name: "sum broadcast", op: "Sum", opset: 13, in: []*value{f32(dims(2, 2), 1, 2, 3, 4), f32(dims(2), 10, 20), f32(dims(), 100)}, want: []*value{f32(dims(2, 2), 111, 122, 113, 124)}},
		{name: "mean", op: "Mean", opset: 13, in: []*value{f64(dims(2), 1, 2), f64(dims(2), 3, 5)}, want: []*value{f64(dims(2), 2, 3.5)}},
		{name: "mean one input", op: "Mean", opset: 8, in: []*value{f32(dims(2), 1, 2)}, want: []*value{f32(dims(2), 1, 2)}},
		{name: "castlike to int32", op: "CastLike", opset: 15, in: []*value{f32(dims(3), 1.9, -1.9, 0), i32(dims(1), 0)}, want: []*value{i32(dims(3), 1, -1, 0)}},
		{name: "castlike to bool", op: "CastLike", opset: 25, in: []*value{f64(dims(2), 0, 0.5), bools(dims(), false)}, want: []*value{bools(dims(2), false, true)}},
	})
}
