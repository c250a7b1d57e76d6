package exec

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// TestMiscOps checks Swish, BitCast, Compress, Unique, ReverseSequence,
// DepthToSpace and SpaceToDepth beyond ONNX's node tests: values worked
// out by hand from the spec (numpy's compress and unique, IEEE-754 bit
// patterns), and the errors.
func TestMiscOps(t *testing.T) {
	nan := float32(math.NaN())
	swish := float32(2 / (1 + math.Exp(-1))) // 2·sigmoid(0.5·2)
	runOpCases(t, []opCase{
		{name: "Swish alpha", op: "Swish", opset: 24, attrs: attrs{"alpha": aFloat(0.5)},
			in: []*value{f32(dims(2), 2, 0)}, want: []*value{f32(dims(2), swish, 0)}},
		{name: "BitCast float32 to int32", op: "BitCast", opset: 26, attrs: attrs{"to": aInt(int64(Int32))},
			in: []*value{f32(dims(3), 1, -2, 0)}, want: []*value{i32(dims(3), 0x3f800000, -0x40000000, 0)}},
		{name: "BitCast int64 to float64", op: "BitCast", opset: 26, attrs: attrs{"to": aInt(int64(Float64))},
			in: []*value{i64(dims(1), 0x3ff8000000000000)}, want: []*value{f64(dims(1), 1.5)}},
		{name: "BitCast width", op: "BitCast", opset: 26, attrs: attrs{"to": aInt(int64(Int64))},
			in: []*value{f32(dims(1), 1)}, err: "cannot reinterpret float32 (32 bits) as int64 (64 bits); BitCast keeps the width"},
		{name: "Compress short condition", op: "Compress", opset: 11, attrs: attrs{"axis": aInt(-1)},
			in: []*value{i64(dims(2, 3), 1, 2, 3, 4, 5, 6), bools(dims(2), false, true)}, want: []*value{i64(dims(2, 1), 2, 5)}},
		{name: "Compress flattened", op: "Compress", opset: 11,
			in: []*value{i64(dims(2, 2), 1, 2, 3, 4), bools(dims(4), true, false, false, true)}, want: []*value{i64(dims(2), 1, 4)}},
		{name: "Compress long condition", op: "Compress", opset: 11, attrs: attrs{"axis": aInt(0)},
			in: []*value{i64(dims(2), 1, 2), bools(dims(3), true, true, true)}, err: "condition has 3 entries for 2 items"},
		{name: "Unique NaN", op: "Unique", opset: 11, in: []*value{f32(dims(5), nan, 2, nan, -1, 2)}, outs: 4,
			want: []*value{f32(dims(3), -1, 2, nan), i64(dims(3), 3, 1, 0), i64(dims(5), 2, 1, 2, 0, 1), i64(dims(3), 1, 2, 2)}},
		{name: "Unique unsorted bool", op: "Unique", opset: 11, attrs: attrs{"sorted": aInt(0)}, in: []*value{bools(dims(3), true, false, true)}, outs: 4,
			want: []*value{bools(dims(2), true, false), i64(dims(2), 0, 1), i64(dims(3), 0, 1, 0), i64(dims(2), 2, 1)}},
		{name: "Unique int64 beyond 2^53", op: "Unique", opset: 11, in: []*value{i64(dims(2), 1<<60+1, 1<<60)},
			want: []*value{i64(dims(2), 1<<60, 1<<60+1)}},
		{name: "ReverseSequence length 0", op: "ReverseSequence", opset: 10, attrs: attrs{"batch_axis": aInt(0), "time_axis": aInt(1)},
			in: []*value{f32(dims(2, 3), 1, 2, 3, 4, 5, 6), i64(dims(2), 0, 3)}, want: []*value{f32(dims(2, 3), 1, 2, 3, 6, 5, 4)}},
		{name: "ReverseSequence long", op: "ReverseSequence", opset: 10,
			in: []*value{f32(dims(2, 1), 1, 2), i64(dims(1), 3)}, err: "sequence_lens[0] is 3, outside [0, 2]"},
		{name: "ReverseSequence axes", op: "ReverseSequence", opset: 10, attrs: attrs{"batch_axis": aInt(0)},
			in: []*value{f32(dims(2, 1), 1, 2), i64(dims(2), 1, 1)}, err: "time_axis 0 and batch_axis 0 must be 0 and 1, one each"},
		{name: "DepthToSpace channels", op: "DepthToSpace", opset: 13, attrs: attrs{"blocksize": aInt(2)},
			in: []*value{f32(dims(1, 2, 1, 1), 1, 2)}, err: "input must be (N, C, H, W) with C divisible by blocksize² = 4, is float32 (1, 2, 1, 1)"},
		{name: "SpaceToDepth CRD", op: "SpaceToDepth", opset: 28, attrs: attrs{"blocksize": aInt(2), "mode": {kind: attrString, s: "CRD"}},
			in: []*value{f32(dims(1, 2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8)}, want: []*value{f32(dims(1, 8, 1, 1), 1, 2, 3, 4, 5, 6, 7, 8)}},
		{name: "SpaceToDepth DCR", op: "SpaceToDepth", opset: 13, attrs: attrs{"blocksize": aInt(2)},
			in: []*value{f32(dims(1, 2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8)}, want: []*value{f32(dims(1, 8, 1, 1), 1, 5, 2, 6, 3, 7, 4, 8)}},
	})
}

// TestMiscOpsRefusedByNew checks the attribute errors New reports.
func TestMiscOpsRefusedByNew(t *testing.T) {
	model := func(opset int64, op string, attrs ...*onnxpb.AttributeProto) *onnxpb.ModelProto {
		return graphSpec{opset: opset, inputs: []*onnxpb.ValueInfoProto{untyped("x", onnxio.Float)}, outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			nodes: []*onnxpb.NodeProto{nodeP("n", op, []string{"x"}, []string{"y"}, attrs...)}}.model()
	}
	mode := &onnxpb.AttributeProto{Name: proto.String("mode"), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte("CRD")}
	bad := &onnxpb.AttributeProto{Name: proto.String("mode"), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte("RDC")}
	for _, c := range []struct {
		m   *onnxpb.ModelProto
		err string
	}{
		{model(13, "SpaceToDepth", intAttr("blocksize", 2), mode), `has attribute "mode", which SpaceToDepth defines from opset 28 on`},
		{model(13, "DepthToSpace", intAttr("blocksize", 2), bad), `mode "RDC" is neither DCR nor CRD`},
		{model(13, "DepthToSpace"), `needs attribute blocksize of at least 1`},
		{model(26, "BitCast"), `needs attribute "to"`},
		{model(26, "BitCast", intAttr("to", 10)), `dtype float16 is not supported`},
	} {
		_, err := New(c.m)
		require.Error(t, err)
		assert.Contains(t, err.Error(), c.err)
	}
}
