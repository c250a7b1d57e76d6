package exec

import "testing"

// TestQuantization checks the quantization ops on the spec's examples and
// on per-axis and blocked scales worked out by hand.
func TestQuantization(t *testing.T) {
	i8 := func(shape []int, data ...int8) *value { return valueOf(shape, data) }
	runOpCases(t, []opCase{
		{name: "quantize uint8 saturates, half to even", op: "QuantizeLinear", opset: 13, in: []*value{f32(dims(6), 0, 2, 3, 1000, -254, -1000), f32(dims(), 2), u8(dims(), 128)}, want: []*value{u8(dims(6), 128, 129, 130, 255, 1, 0)}},
		{name: "quantize default uint8", op: "QuantizeLinear", opset: 10, in: []*value{f32(dims(3), 1.5, 2.5, -3.5), f32(dims(), 1)}, want: []*value{u8(dims(3), 2, 2, 0)}},
		{name: "quantize int8 output_dtype", op: "QuantizeLinear", opset: 21, attrs: attrs{"output_dtype": aInt(int64(Int8))}, in: []*value{f32(dims(3), 1.5, 2.5, -3.5), f32(dims(), 1)}, want: []*value{i8(dims(3), 2, 2, -4)}},
		{name: "quantize per axis", op: "QuantizeLinear", opset: 13, in: []*value{f32(dims(1, 2), 4, 4), f32(dims(2), 1, 2), i8(dims(2), 0, 10)}, want: []*value{i8(dims(1, 2), 4, 12)}},
		{name: "quantize blocked", op: "QuantizeLinear", opset: 21, attrs: attrs{"block_size": aInt(2)}, in: []*value{f32(dims(1, 4), 1, 2, 30, 40), f32(dims(1, 2), 1, 10)}, want: []*value{u8(dims(1, 4), 1, 2, 3, 4)}},
		{name: "quantize int16", op: "QuantizeLinear", opset: 21, in: []*value{f32(dims(2), 40000, -5), f32(dims(), 1), valueOf(dims(), []int16{0})}, want: []*value{valueOf(dims(2), []int16{32767, -5})}},
		{name: "quantize per axis before 13", op: "QuantizeLinear", opset: 10, in: []*value{f32(dims(1, 2), 4, 4), f32(dims(2), 1, 2)}, err: "per-axis quantization is defined from opset 13 on"},
		{name: "quantize bad scale", op: "QuantizeLinear", opset: 13, in: []*value{f32(dims(1, 2), 4, 4), f32(dims(3), 1, 2, 3)}, err: "neither a scalar nor one per index of axis 1"},
		{name: "dequantize", op: "DequantizeLinear", opset: 13, in: []*value{u8(dims(4), 0, 3, 128, 255), f32(dims(), 2), u8(dims(), 128)}, want: []*value{f32(dims(4), -256, -250, 0, 254)}},
		{name: "dequantize int32", op: "DequantizeLinear", opset: 10, in: []*value{i32(dims(2), -3, 5), f32(dims(), 0.5)}, want: []*value{f32(dims(2), -1.5, 2.5)}},
		{name: "dequantize per axis", op: "DequantizeLinear", opset: 13, attrs: attrs{"axis": aInt(0)}, in: []*value{i8(dims(2, 1), -4, 4), f32(dims(2), 0.5, 2), i8(dims(2), 0, 2)}, want: []*value{f32(dims(2, 1), -2, 4)}},
		{name: "dequantize blocked", op: "DequantizeLinear", opset: 21, attrs: attrs{"axis": aInt(0), "block_size": aInt(2)}, in: []*value{u8(dims(3, 1), 1, 2, 3), f32(dims(2, 1), 1, 10)}, want: []*value{f32(dims(3, 1), 1, 2, 30)}},
		{name: "dequantize zero point type", op: "DequantizeLinear", opset: 13, in: []*value{u8(dims(1), 1), f32(dims(), 1), i8(dims(), 0)}, err: "must have x's type uint8"},
		{name: "dynamic quantize", op: "DynamicQuantizeLinear", opset: 11, outs: 3, in: []*value{f32(dims(6), 0, 2, -3, -2.5, 1.34, 0.5)},
			want: []*value{u8(dims(6), 153, 255, 0, 26, 221, 179), f32(dims(), 5.0/255), u8(dims(), 153)}},
		{name: "dynamic quantize all zero", op: "DynamicQuantizeLinear", opset: 11, outs: 3, in: []*value{f32(dims(2), 0, 0)},
			want: []*value{u8(dims(2), 0, 0), f32(dims(), 1.0/255), u8(dims(), 0)}},
		{name: "matmul integer", op: "MatMulInteger", opset: 10, in: []*value{u8(dims(4, 3), 11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0), u8(dims(3, 2), 1, 4, 2, 5, 3, 6), u8(dims(), 12), u8(dims(), 0)},
			want: []*value{i32(dims(4, 2), -38, -83, -44, -98, -50, -113, -56, -128)}},
		{name: "matmul integer per-row and per-column zero points", op: "MatMulInteger", opset: 10, in: []*value{i8(dims(2, 2), 1, 2, 3, 5), i8(dims(2, 2), 1, 2, 3, 4), i8(dims(2), 1, 3), i8(dims(2), 0, 1)},
			want: []*value{i32(dims(2, 2), 3, 3, 6, 6)}}, // (A - [1 3]ᵀ) = [[0 1] [0 2]], (B - [0 1]) = [[1 1] [3 3]]
		{name: "matmul integer types", op: "MatMulInteger", opset: 10, in: []*value{i32(dims(1, 1), 1), i32(dims(1, 1), 1)}, err: "want uint8 or int8"},
	})
}
