package exec

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
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

// typed makes a value of a narrow type from its storage.
func typed(dt DType, shape []int, data any) *value {
	return &value{dtype: dt, shape: shape, data: data}
}

// Cast to the quantized types follows ONNX's reference (the expected
// values are those of its node tests test_cast_*).
func TestCastToQuantizedTypes(t *testing.T) {
	to := func(dt DType) attrs { return attrs{"to": aInt(int64(dt))} }
	noSat := func(dt DType) attrs { return attrs{"to": aInt(int64(dt)), "saturate": aInt(0)} }
	runOpCases(t, []opCase{
		{name: "float to int4 wraps", op: "Cast", opset: 25, attrs: to(Int4),
			in: []*value{f32(dims(5), -9, -8, 7, 8, 9.7)}, want: []*value{typed(Int4, dims(5), []int8{7, -8, 7, -8, -7})}},
		{name: "float to uint2 wraps", op: "Cast", opset: 25, attrs: to(Uint2),
			in: []*value{f32(dims(4), -1, 3, 4, 5)}, want: []*value{typed(Uint2, dims(4), []uint8{3, 3, 0, 1})}},
		{name: "int4 to float", op: "Cast", opset: 25, attrs: to(Float32),
			in: []*value{typed(Int4, dims(2), []int8{-8, 7})}, want: []*value{f32(dims(2), -8, 7)}},
		{name: "float to e4m3fn saturates", op: "Cast", opset: 19, attrs: to(Float8E4M3FN),
			in: []*value{f32(dims(4), 1000, -inf32, 0.3, nan32)}, want: []*value{typed(Float8E4M3FN, dims(4), []float32{448, -448, 0.3125, nan32})}},
		{name: "float to e4m3fn without saturation", op: "Cast", opset: 19, attrs: noSat(Float8E4M3FN),
			in: []*value{f32(dims(2), 1000, -inf32)}, want: []*value{typed(Float8E4M3FN, dims(2), []float32{nan32, nan32})}},
		{name: "float16 to e5m2 without saturation", op: "Cast", opset: 19, attrs: noSat(Float8E5M2),
			in: []*value{f16(dims(2), 61440, 0.1)}, want: []*value{typed(Float8E5M2, dims(2), []float32{inf32, 0.09375})}},
		{name: "e5m2fnuz to float16", op: "Cast", opset: 19, attrs: to(Float16),
			in: []*value{typed(Float8E5M2FNUZ, dims(2), []float32{57344, 0x1p-17})}, want: []*value{f16(dims(2), 57344, 0x1p-17)}}, // a float16 subnormal
		{name: "float to float4e2m1", op: "Cast", opset: 23, attrs: to(Float4E2M1),
			in: []*value{f32(dims(4), 0.48, 1.05, -3.5, 9)}, want: []*value{typed(Float4E2M1, dims(4), []float32{0.5, 1, -4, 6})}},
		{name: "float to e8m0 rounds up", op: "Cast", opset: 25, attrs: to(Float8E8M0),
			in: []*value{f32(dims(3), 0.124, 1.1, 2)}, want: []*value{typed(Float8E8M0, dims(3), []float32{0.125, 2, 2})}},
		{name: "float to e8m0 rounds down", op: "Cast", opset: 25, attrs: attrs{"to": aInt(int64(Float8E8M0)), "round_mode": {kind: attrString, s: "down"}},
			in: []*value{f32(dims(2), 0.124, 1.1)}, want: []*value{typed(Float8E8M0, dims(2), []float32{0.0625, 1})}},
		{name: "bad round_mode", op: "Cast", opset: 25, attrs: attrs{"to": aInt(int64(Float8E8M0)), "round_mode": {kind: attrString, s: "sideways"}},
			in: []*value{f32(dims(1), 1)}, err: `round_mode "sideways" is not one of up, down, nearest`},
		{name: "castlike to e4m3fnuz", op: "CastLike", opset: 19, attrs: attrs{"saturate": aInt(0)},
			in: []*value{f32(dims(2), 300, 0), typed(Float8E4M3FNUZ, dims(0), []float32{})}, want: []*value{typed(Float8E4M3FNUZ, dims(2), []float32{nan32, 0})}},
	})
}

// Ops that move data keep a narrow integer's type.
func TestNarrowIntsMove(t *testing.T) {
	got, err := runOp(opCase{op: "Transpose", opset: 21, attrs: attrs{"perm": aInts(1, 0)},
		in: []*value{typed(Uint4, dims(2, 2), []uint8{1, 2, 3, 15})}})
	require.NoError(t, err)
	assertValue(t, typed(Uint4, dims(2, 2), []uint8{1, 3, 2, 15}), got[0])
}

// RunArrays rounds narrow float inputs that hold other numbers, in a copy,
// and refuses narrow integers out of range.
func TestRunArraysNarrowInputs(t *testing.T) {
	g, err := New(identityOf(onnxio.Float16).model())
	require.NoError(t, err)
	in := &array.Array{DType: array.Float16, Shape: []int{2}, Data: []float32{0.1, 1e5}}
	out, err := g.RunArrays(context.Background(), map[string]*array.Array{"x": in})
	require.NoError(t, err)
	assert.Equal(t, []float32{0.0999755859375, float32(math.Inf(1))}, out["y"].Data)
	assert.Equal(t, []float32{0.1, 1e5}, in.Data, "the caller's array is not written")

	g, err = New(identityOf(onnxpb.TensorProto_INT4).model())
	require.NoError(t, err)
	_, err = g.RunArrays(context.Background(), map[string]*array.Array{"x": {DType: array.Int4, Shape: []int{2}, Data: []int8{7, 8}}})
	assert.EqualError(t, err, `exec: input "x": int4 element 1 is 8, outside [-8, 7]`)
}

// identityOf is a graph y = Identity(x) of one element type.
func identityOf(dt onnxio.DataType) graphSpec {
	return graphSpec{opset: 21, nodes: []*onnxpb.NodeProto{nodeP("id", "Identity", []string{"x"}, []string{"y"})},
		inputs: []*onnxpb.ValueInfoProto{info("x", dt, 2)}, outputs: []*onnxpb.ValueInfoProto{info("y", dt, 2)}}
}

// Run takes *tensor.Dense of the storage types for inputs of the narrow
// types and gives outputs in them.
func TestRunDenseNarrowTypes(t *testing.T) {
	g, err := New(identityOf(onnxio.Float16).model())
	require.NoError(t, err)
	out, err := g.Run(map[string]*tensor.Dense{"x": dense([]int{2}, float32(0.1), 2)})
	require.NoError(t, err)
	assert.Equal(t, []float32{0.0999755859375, 2}, out["y"].Data())

	g, err = New(identityOf(onnxpb.TensorProto_UINT4).model())
	require.NoError(t, err)
	out, err = g.Run(map[string]*tensor.Dense{"x": dense([]int{2}, uint8(15), 0)})
	require.NoError(t, err)
	assert.Equal(t, []uint8{15, 0}, out["y"].Data())
	_, err = g.Run(map[string]*tensor.Dense{"x": dense([]int{2}, uint8(16), 0)})
	assert.EqualError(t, err, `exec: input "x": uint4 element 0 is 16, outside [0, 15]`)
}

func TestRunArraysTakesStorageTypes(t *testing.T) {
	g, err := New(identityOf(onnxio.BFloat16).model())
	require.NoError(t, err)
	out, err := g.RunArrays(context.Background(), map[string]*array.Array{"x": array.FromSlice([]int{2}, []float32{0.1, 3})})
	require.NoError(t, err)
	assert.Equal(t, &array.Array{DType: array.BFloat16, Shape: []int{2}, Data: []float32{0.10009765625, 3}}, out["y"])
	_, err = g.RunArrays(context.Background(), map[string]*array.Array{"x": array.FromSlice([]int{2}, []float64{0.1, 3})})
	assert.EqualError(t, err, `exec: input "x": dtype float64, the graph declares x bfloat16 [2]`)
}
