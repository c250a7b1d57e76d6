package exec

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

var nan32, inf32 = float32(math.NaN()), float32(math.Inf(1))

func TestArithmetic(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "add row broadcast", op: "Add", opset: 14,
			in:   []*value{f32(dims(2, 3), 1, 2, 3, 4, 5, 6), f32(dims(3), 10, 20, 30)},
			want: []*value{f32(dims(2, 3), 11, 22, 33, 14, 25, 36)}},
		{name: "add outer broadcast", op: "Add", opset: 14,
			in:   []*value{f32(dims(2, 1), 1, 2), f32(dims(1, 3), 10, 20, 30)},
			want: []*value{f32(dims(2, 3), 11, 21, 31, 12, 22, 32)}},
		{name: "add scalar first", op: "Add", opset: 7,
			in:   []*value{f32(dims(), 1), f32(dims(2), 1, 2)},
			want: []*value{f32(dims(2), 2, 3)}},
		{name: "sub scalar first", op: "Sub", opset: 14,
			in:   []*value{f32(dims(), 10), f32(dims(3), 1, 2, 3)},
			want: []*value{f32(dims(3), 9, 8, 7)}},
		{name: "mul int64 broadcast", op: "Mul", opset: 14,
			in:   []*value{i64(dims(3), 1, 2, 3), i64(dims(2, 1), 2, 3)},
			want: []*value{i64(dims(2, 3), 2, 4, 6, 3, 6, 9)}},
		{name: "mul rank-3 by column", op: "Mul", opset: 14,
			in:   []*value{f32(dims(2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8), f32(dims(2, 1), 10, 100)},
			want: []*value{f32(dims(2, 2, 2), 10, 20, 300, 400, 50, 60, 700, 800)}},
		{name: "div int truncates toward zero", op: "Div", opset: 14,
			in:   []*value{i64(dims(4), 7, -7, 7, -7), i64(dims(4), 2, 2, -2, -2)},
			want: []*value{i64(dims(4), 3, -3, -3, 3)}},
		{name: "div float by zero", op: "Div", opset: 14,
			in:   []*value{f32(dims(3), 1, -1, 0), f32(dims(), 0)},
			want: []*value{f32(dims(3), inf32, -inf32, nan32)}},
		{name: "div int by zero", op: "Div", opset: 14,
			in:  []*value{i32(dims(2), 1, 2), i32(dims(2), 1, 0)},
			err: "integer division by zero"},
		{name: "shapes do not broadcast", op: "Add", opset: 14,
			in:  []*value{f32(dims(2, 3), 1, 2, 3, 4, 5, 6), f32(dims(2), 1, 2)},
			err: "shapes (2, 3) and (2,) do not broadcast"},
		{name: "dtypes differ", op: "Add", opset: 14,
			in:  []*value{f32(dims(1), 1), i64(dims(1), 1)},
			err: "different dtypes float32 and int64"},
		{name: "bool arithmetic", op: "Add", opset: 14,
			in:  []*value{bools(dims(1), true), bools(dims(1), true)},
			err: "dtype bool is not supported"},
		{name: "max of three broadcast", op: "Max", opset: 13,
			in:   []*value{f32(dims(3), 1, 5, 3), f32(dims(2, 1), 4, 2), f32(dims(), 3)},
			want: []*value{f32(dims(2, 3), 4, 5, 4, 3, 5, 3)}},
		{name: "max of one", op: "Max", opset: 13,
			in:   []*value{i64(dims(2), 1, 2)},
			want: []*value{i64(dims(2), 1, 2)}},
		{name: "min propagates NaN", op: "Min", opset: 13,
			in:   []*value{f32(dims(2), 1, nan32), f32(dims(2), 0, 0)},
			want: []*value{f32(dims(2), 0, nan32)}},
		{name: "max propagates NaN", op: "Max", opset: 13,
			in:   []*value{f32(dims(2), nan32, 1), f32(dims(2), 0, 2)},
			want: []*value{f32(dims(2), nan32, 2)}},
		{name: "min uint8", op: "Min", opset: 13,
			in:   []*value{valueOf(dims(2), []uint8{200, 3}), valueOf(dims(2), []uint8{100, 4})},
			want: []*value{valueOf(dims(2), []uint8{100, 3})}},
	})
}

func TestPow(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "float exponents", op: "Pow", opset: 15,
			in:   []*value{f32(dims(3), -2, 2, 4), f32(dims(3), 3, -1, 0.5)},
			want: []*value{f32(dims(3), -8, 0.5, 2)}},
		{name: "negative base, int64 exponent", op: "Pow", opset: 15,
			in:   []*value{f32(dims(2), -2, 3), i64(dims(2), 3, 2)},
			want: []*value{f32(dims(2), -8, 9)}},
		{name: "negative base, fractional exponent", op: "Pow", opset: 15,
			in:   []*value{f32(dims(1), -8), f32(dims(1), 1.0/3)},
			want: []*value{f32(dims(1), nan32)}},
		{name: "int64 powers are exact", op: "Pow", opset: 15,
			in:   []*value{i64(dims(3), 2, -3, 5), i64(dims(3), 62, 3, 0)},
			want: []*value{i64(dims(3), 1<<62, -27, 1)}},
		{name: "int64 negative exponents", op: "Pow", opset: 15,
			in:   []*value{i64(dims(3), 2, 1, -1), i64(dims(3), -1, -3, -3)},
			want: []*value{i64(dims(3), 0, 1, -1)}},
		{name: "int base, float exponent truncates", op: "Pow", opset: 15,
			in:   []*value{i32(dims(2), 2, 4), f32(dims(2), 0.5, 0.5)},
			want: []*value{i32(dims(2), 1, 2)}},
		{name: "broadcast scalar exponent", op: "Pow", opset: 15,
			in:   []*value{f64(dims(2, 2), 1, 2, 3, 4), f64(dims(), 2)},
			want: []*value{f64(dims(2, 2), 1, 4, 9, 16)}},
	})
}

func TestFloatFunctions(t *testing.T) {
	x := f32(dims(4), 0, 0.5, -1, 3)
	round := func(f func(float64) float64, xs ...float32) *value {
		out := make([]float32, len(xs))
		for i, v := range xs {
			out[i] = float32(f(float64(v)))
		}
		return f32(dims(len(xs)), out...)
	}
	runOpCases(t, []opCase{
		// Erf in float64 then rounded, as the numpy reference computes it.
		{name: "erf", op: "Erf", opset: 13, in: []*value{x},
			want: []*value{f32(dims(4), 0, 0.5204998778, -0.8427007929, 0.9999779095)}},
		{name: "erf rounds once", op: "Erf", opset: 13, in: []*value{x}, want: []*value{round(math.Erf, 0, 0.5, -1, 3)}},
		{name: "sqrt", op: "Sqrt", opset: 13, in: []*value{f32(dims(3), 4, 2, -1)},
			want: []*value{f32(dims(3), 2, 1.41421356, nan32)}},
		{name: "exp", op: "Exp", opset: 13, in: []*value{f32(dims(2), 0, 1)}, want: []*value{f32(dims(2), 1, 2.71828183)}},
		{name: "log", op: "Log", opset: 13, in: []*value{f32(dims(3), 1, math.E, 0)},
			want: []*value{f32(dims(3), 0, 1, -inf32)}},
		{name: "tanh", op: "Tanh", opset: 13, in: []*value{f32(dims(2), 0, 1)}, want: []*value{f32(dims(2), 0, 0.76159416)}},
		{name: "sigmoid", op: "Sigmoid", opset: 13, in: []*value{f32(dims(3), 0, 2, -200)},
			want: []*value{f32(dims(3), 0.5, 0.88079708, 0)}},
		{name: "sin cos", op: "Sin", opset: 7, in: []*value{f64(dims(2), 0, math.Pi/2)}, want: []*value{f64(dims(2), 0, 1)}},
		{name: "cos", op: "Cos", opset: 7, in: []*value{f64(dims(2), 0, math.Pi)}, want: []*value{f64(dims(2), 1, -1)}},
		{name: "reciprocal", op: "Reciprocal", opset: 13, in: []*value{f32(dims(2), 2, -4)}, want: []*value{f32(dims(2), 0.5, -0.25)}},
		{name: "isnan", op: "IsNaN", opset: 13, in: []*value{f32(dims(3), nan32, 1, inf32)},
			want: []*value{bools(dims(3), true, false, false)}},
		{name: "exp of int", op: "Exp", opset: 13, in: []*value{i64(dims(1), 1)}, err: "dtype int64 is not supported"},
		{name: "abs", op: "Abs", opset: 13, in: []*value{f32(dims(3), -1.5, 2, float32(math.Copysign(0, -1)))},
			want: []*value{f32(dims(3), 1.5, 2, 0)}},
		{name: "abs int64", op: "Abs", opset: 13, in: []*value{i64(dims(2), -3, 4)}, want: []*value{i64(dims(2), 3, 4)}},
		{name: "neg int32", op: "Neg", opset: 13, in: []*value{i32(dims(2), 1, -2)}, want: []*value{i32(dims(2), -1, 2)}},
		{name: "relu", op: "Relu", opset: 14, in: []*value{f32(dims(4), -1, 0, 2, nan32)}, want: []*value{f32(dims(4), 0, 0, 2, nan32)}},
		{name: "relu int64", op: "Relu", opset: 14, in: []*value{i64(dims(2), -1, 3)}, want: []*value{i64(dims(2), 0, 3)}},
	})
}

func TestClip(t *testing.T) {
	x := f32(dims(3), -2, 0, 5)
	runOpCases(t, []opCase{
		{name: "min and max inputs", op: "Clip", opset: 13, in: []*value{x, f32(dims(), -1), f32(dims(), 3)},
			want: []*value{f32(dims(3), -1, 0, 3)}},
		{name: "max only", op: "Clip", opset: 13, in: []*value{x, nil, f32(dims(), 3)},
			want: []*value{f32(dims(3), -2, 0, 3)}},
		{name: "no bounds", op: "Clip", opset: 13, in: []*value{x}, want: []*value{x}},
		{name: "min above max gives max", op: "Clip", opset: 13, in: []*value{x, f32(dims(), 4), f32(dims(), 1)},
			want: []*value{f32(dims(3), 1, 1, 1)}},
		{name: "attributes before opset 11", op: "Clip", opset: 6, attrs: attrs{"min": aFloat(-1)}, in: []*value{x},
			want: []*value{f32(dims(3), -1, 0, 5)}},
		{name: "int64", op: "Clip", opset: 13, in: []*value{i64(dims(2), -5, 5), i64(dims(), 0)},
			want: []*value{i64(dims(2), 0, 5)}},
	})
}

func TestCompareAndLogic(t *testing.T) {
	tf := bools(dims(4), true, true, false, false)
	ft := bools(dims(4), true, false, true, false)
	runOpCases(t, []opCase{
		{name: "equal int64 broadcast", op: "Equal", opset: 13, in: []*value{i64(dims(3), 1, 2, 3), i64(dims(), 2)},
			want: []*value{bools(dims(3), false, true, false)}},
		{name: "equal bool", op: "Equal", opset: 13, in: []*value{tf, ft}, want: []*value{bools(dims(4), true, false, false, true)}},
		{name: "less", op: "Less", opset: 13, in: []*value{f32(dims(2), 1, 2), f32(dims(2), 2, 2)},
			want: []*value{bools(dims(2), true, false)}},
		{name: "less on bool", op: "Less", opset: 13, in: []*value{tf, ft}, err: "dtype bool is not supported"},
		{name: "greater", op: "Greater", opset: 13, in: []*value{f32(dims(2), 1, 3), f32(dims(1), 2)},
			want: []*value{bools(dims(2), false, true)}},
		{name: "greater or equal", op: "GreaterOrEqual", opset: 16, in: []*value{i32(dims(3), 1, 2, 3), i32(dims(1), 2)},
			want: []*value{bools(dims(3), false, true, true)}},
		{name: "less or equal", op: "LessOrEqual", opset: 16, in: []*value{i32(dims(3), 1, 2, 3), i32(dims(1), 2)},
			want: []*value{bools(dims(3), true, true, false)}},
		{name: "NaN compares false", op: "Equal", opset: 13, in: []*value{f32(dims(1), nan32), f32(dims(1), nan32)},
			want: []*value{bools(dims(1), false)}},
		{name: "and", op: "And", opset: 7, in: []*value{tf, ft}, want: []*value{bools(dims(4), true, false, false, false)}},
		{name: "or", op: "Or", opset: 7, in: []*value{tf, ft}, want: []*value{bools(dims(4), true, true, true, false)}},
		{name: "xor", op: "Xor", opset: 7, in: []*value{tf, ft}, want: []*value{bools(dims(4), false, true, true, false)}},
		{name: "not", op: "Not", opset: 1, in: []*value{tf}, want: []*value{bools(dims(4), false, false, true, true)}},
		{name: "and on float", op: "And", opset: 7, in: []*value{f32(dims(1), 1), f32(dims(1), 1)}, err: "want bool"},
	})
}

func TestWhere(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "three-way broadcast", op: "Where", opset: 16,
			in:   []*value{bools(dims(2, 1), true, false), f32(dims(3), 1, 2, 3), f32(dims(), 0)},
			want: []*value{f32(dims(2, 3), 1, 2, 3, 0, 0, 0)}},
		{name: "causal mask fill", op: "Where", opset: 16,
			in: []*value{bools(dims(2, 2), false, true, false, false), f32(dims(), -inf32),
				f32(dims(1, 2, 2), 1, 2, 3, 4)},
			want: []*value{f32(dims(1, 2, 2), 1, -inf32, 3, 4)}},
		{name: "int64 values", op: "Where", opset: 16,
			in:   []*value{bools(dims(2), true, false), i64(dims(2), 1, 2), i64(dims(2), 3, 4)},
			want: []*value{i64(dims(2), 1, 4)}},
		{name: "condition not bool", op: "Where", opset: 16,
			in: []*value{f32(dims(1), 1), f32(dims(1), 1), f32(dims(1), 1)}, err: "want bool"},
	})
}

func TestCast(t *testing.T) {
	x := f32(dims(4), 1.9, -1.9, 0, nan32)
	runOpCases(t, []opCase{
		{name: "float to int64 truncates", op: "Cast", opset: 13, attrs: attrs{"to": aInt(int64(Int64))},
			in: []*value{f32(dims(3), 1.9, -1.9, 0)}, want: []*value{i64(dims(3), 1, -1, 0)}},
		{name: "float to bool", op: "Cast", opset: 13, attrs: attrs{"to": aInt(int64(Bool))},
			in: []*value{x}, want: []*value{bools(dims(4), true, true, false, true)}},
		{name: "bool to float", op: "Cast", opset: 13, attrs: attrs{"to": aInt(int64(Float32))},
			in: []*value{bools(dims(2), true, false)}, want: []*value{f32(dims(2), 1, 0)}},
		{name: "int64 to float64", op: "Cast", opset: 13, attrs: attrs{"to": aInt(int64(Float64))},
			in: []*value{i64(dims(2), -3, 1<<40)}, want: []*value{f64(dims(2), -3, 1<<40)}},
		{name: "int64 to bool", op: "Cast", opset: 13, attrs: attrs{"to": aInt(int64(Bool))},
			in: []*value{i64(dims(2), 0, -5)}, want: []*value{bools(dims(2), false, true)}},
		{name: "same type", op: "Cast", opset: 13, attrs: attrs{"to": aInt(int64(Float32))},
			in: []*value{x}, want: []*value{x}},
		// np.array([1.9, -1.9, 0, nan], np.float32).astype(np.float16)
		{name: "to float16", op: "Cast", opset: 13, attrs: attrs{"to": aInt(int64(Float16))},
			in: []*value{x}, want: []*value{f16(dims(4), 1.900390625, -1.900390625, 0, nan32)}},
		// torch.tensor([1.9, 70000, 1e-40]).bfloat16()
		{name: "to bfloat16", op: "Cast", opset: 13, attrs: attrs{"to": aInt(int64(BFloat16))},
			in: []*value{f32(dims(3), 1.9, 70000, 1e-40)}, want: []*value{bf16(dims(3), 1.8984375, 70144, 9.183549615799121e-41)}},
		// np.float64(1 + 2**-11 + 2**-40).astype(np.float16) is 1 + 2**-10:
		// rounding to float32 first would land on the tie and give 1.
		{name: "float64 to float16 rounds once", op: "Cast", opset: 13, attrs: attrs{"to": aInt(int64(Float16))},
			in: []*value{f64(dims(2), 1+0x1p-11+0x1p-40, 65520)}, want: []*value{f16(dims(2), 1+0x1p-10, inf32)}},
		{name: "int64 to float16", op: "Cast", opset: 13, attrs: attrs{"to": aInt(int64(Float16))},
			in: []*value{i64(dims(3), 2049, -65504, 1<<20)}, want: []*value{f16(dims(3), 2048, -65504, inf32)}},
		{name: "float16 to float32 is exact", op: "Cast", opset: 13, attrs: attrs{"to": aInt(int64(Float32))},
			in: []*value{f16(dims(2), 0x1p-24, -65504)}, want: []*value{f32(dims(2), 0x1p-24, -65504)}},
		{name: "float16 to int32 truncates", op: "Cast", opset: 13, attrs: attrs{"to": aInt(int64(Int32))},
			in: []*value{f16(dims(2), 2.5, -1.900390625)}, want: []*value{i32(dims(2), 2, -1)}},
		{name: "bfloat16 to float16", op: "Cast", opset: 13, attrs: attrs{"to": aInt(int64(Float16))},
			in: []*value{bf16(dims(2), 1.8984375, 70144)}, want: []*value{f16(dims(2), 1.8984375, inf32)}},
	})
}

// TestPowSquareAndCubeKeepMathPowBits checks Pow's path for float32
// bases raised to 2 and 3 (float32 and float64 exponents, scalar and
// one-element) against math.Pow computed in float64 and rounded once,
// bit for bit, over values of every magnitude, signs, zeros, infinities
// and NaN.
func TestPowSquareAndCubeKeepMathPowBits(t *testing.T) {
	var xs []float32
	for x := float32(1e-44); x < 1e38; x *= 1.37 {
		xs = append(xs, x, -x, math.Nextafter32(x, 0))
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()))
	base := f32(dims(len(xs)), xs...)
	for _, exp := range []*value{f32(dims(), 2), valueOf(dims(1), []float64{3}), f32(dims(1), 3), valueOf(dims(), []float64{2})} {
		y, ok := smallPower(base, exp)
		require.True(t, ok)
		outs, err := powOp(newRunCtx(context.Background(), nil), &node{op: "Pow"}, []*value{base, exp})
		require.NoError(t, err)
		got := outs[0].data.([]float32)
		for i, x := range xs {
			want := float32(math.Pow(float64(x), y))
			if want != want {
				require.True(t, got[i] != got[i], "%g^%g", x, y)
				continue
			}
			require.Equal(t, math.Float32bits(want), math.Float32bits(got[i]), "%g^%g = %g, want %g", x, y, got[i], want)
		}
	}
}
