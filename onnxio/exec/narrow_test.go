package exec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Ops compute float16 and bfloat16 in float32 and store their results
// rounded to the narrow type; the expected values are NumPy's float16
// arithmetic (np.float16(1) + np.float16(2**-12) is 1.0) and PyTorch's
// bfloat16 arithmetic, which round every op's result.
func TestNarrowResultsAreRounded(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "float16 add rounds", op: "Add", opset: 14,
			in:   []*value{f16(dims(3), 1, 1, 2048), f16(dims(3), 0x1p-12, 0x1p-10, 1)},
			want: []*value{f16(dims(3), 1, 1+0x1p-10, 2048)}},
		{name: "float16 div", op: "Div", opset: 14,
			in: []*value{f16(dims(2), 1, 60000), f16(dims(2), 3, 0.5)}, want: []*value{f16(dims(2), 0.333251953125, inf32)}},
		{name: "float16 softmax", op: "Softmax", opset: 13, attrs: attrs{"axis": aInt(-1)},
			// np.exp(x - x.max()) / sum, computed in float32 and rounded once
			in: []*value{f16(dims(3), 0, 1, 2)}, want: []*value{f16(dims(3), 0.09002685546875, 0.2447509765625, 0.6650390625)}},
		// torch.tensor([1.0], dtype=torch.bfloat16) + 2**-9 is 1.0
		{name: "bfloat16 add rounds", op: "Add", opset: 14,
			in: []*value{bf16(dims(2), 1, 256), bf16(dims(2), 0x1p-9, 1)}, want: []*value{bf16(dims(2), 1, 256)}},
		{name: "float16 base, float32 exponent", op: "Pow", opset: 15,
			in: []*value{f16(dims(2), 3, 10), f32(dims(1), 0.5)}, want: []*value{f16(dims(2), 1.732421875, 3.162109375)}},
		{name: "where keeps float16", op: "Where", opset: 16,
			in:   []*value{bools(dims(2), true, false), f16(dims(2), 1, 2), f16(dims(2), -1, -2)},
			want: []*value{f16(dims(2), 1, -2)}},
		{name: "shape of float16", op: "Shape", opset: 15, in: []*value{f16(dims(2, 0, 3))}, want: []*value{i64(dims(3), 2, 0, 3)}},
		{name: "float16 compare", op: "Less", opset: 13,
			in: []*value{f16(dims(2), 1, 2), f16(dims(2), 2, 1)}, want: []*value{bools(dims(2), true, false)}},
		{name: "dequantize to float16 scale", op: "DequantizeLinear", opset: 19,
			in: []*value{valueOf(dims(2), []int8{3, -7}), f16(dims(), 0.1), valueOf(dims(), []int8{1})}, want: []*value{f16(dims(2), 0.199951171875, -0.7998046875)}},
	})
}

// A view of a float16 input keeps its type and its data; nothing writes
// the input.
func TestNarrowViewsShareData(t *testing.T) {
	x := f16(dims(2, 2), 1, 2, 3, 0x1p-24)
	got, err := runOp(opCase{op: "Reshape", opset: 14, in: []*value{x, i64(dims(1), 4)}})
	require.NoError(t, err)
	assert.Equal(t, Float16, got[0].dtype)
	assert.Equal(t, []int{4}, got[0].shape)
	assert.True(t, sharesData(got[0], []*value{x}))
}

// LayerNormalization of float16 gives Y in float16 and Mean and
// InvStdDev in its stash_type, float32.
func TestNarrowLayerNormOutputTypes(t *testing.T) {
	got, err := runOp(opCase{op: "LayerNormalization", opset: 17, outs: 3, attrs: attrs{"axis": aInt(-1)},
		in: []*value{f16(dims(1, 3), 1, 2, 4), f16(dims(3), 1, 1, 1)}})
	require.NoError(t, err)
	assert.Equal(t, Float16, got[0].dtype)
	assert.Equal(t, Float32, got[1].dtype)
	assert.Equal(t, Float32, got[2].dtype)
	assert.InDelta(t, 7.0/3, got[1].data.([]float32)[0], 1e-6)
}
