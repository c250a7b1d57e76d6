package exec

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// hostileCase is a small model from a stranger, as issue 10 found them: a
// few hundred bytes that ask for terabytes, run for hours or crashed the
// executor. Each becomes a regression test and a seed of FuzzExecutor.
type hostileCase struct {
	name  string
	model *onnxpb.ModelProto
	feeds map[string]*tensor.Dense
	// maxMemory is the budget it runs under (0: the default, 4 GiB).
	maxMemory int64
	// err is the error New or Run must return.
	err string
}

// tensorAttr is a TENSOR attribute.
func tensorAttr(t testing.TB, name string, d *tensor.Dense) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: initializer(t, "", d)}
}

// shapeInit is an int64 vector initializer, a shape or a list of repeats.
func shapeInit(t testing.TB, name string, dims ...int64) *onnxpb.TensorProto {
	return initializer(t, name, dense([]int{len(dims)}, dims...))
}

// filled is ConstantOfShape(shape) with the given one-element value.
func filled(t testing.TB, name, shape string, value *tensor.Dense) *onnxpb.NodeProto {
	return nodeP(name, "ConstantOfShape", []string{shape}, []string{name}, tensorAttr(t, "value", value))
}

// hostileCases are the memory bombs of issue 10 (item 4) and the Concat
// with an empty input name (item 11).
func hostileCases(t testing.TB) []hostileCase {
	f32one := dense([]int{1}, float32(1))
	return []hostileCase{{
		name: "constant of shape 16 GiB",
		model: graphSpec{
			nodes:   []*onnxpb.NodeProto{filled(t, "bomb", "shape", dense([]int{1}, int64(7)))},
			outputs: []*onnxpb.ValueInfoProto{untyped("bomb", onnxio.Int64)},
			inits:   []*onnxpb.TensorProto{shapeInit(t, "shape", 1<<31)},
		}.model(),
		err: `exec: node "bomb" (ConstantOfShape): int64 (2147483648,) needs 16 GiB, over the memory budget of 4 GiB`,
	}, {
		name: "broadcast add 4 TiB",
		model: graphSpec{
			nodes: []*onnxpb.NodeProto{
				filled(t, "col", "colShape", f32one),
				filled(t, "row", "rowShape", f32one),
				nodeP("add", "Add", []string{"col", "row"}, []string{"y"}),
			},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			inits:   []*onnxpb.TensorProto{shapeInit(t, "colShape", 1<<20, 1), shapeInit(t, "rowShape", 1, 1<<20)},
		}.model(),
		err: `exec: node "add" (Add): float32 (1048576, 1048576) needs 4 TiB, over the memory budget of 4 GiB (8 MiB already in use)`,
	}, {
		name: "expand 4 TiB",
		model: graphSpec{
			nodes:   []*onnxpb.NodeProto{nodeP("expand", "Expand", []string{"one", "shape"}, []string{"y"})},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			inits:   []*onnxpb.TensorProto{initializer(t, "one", f32one), shapeInit(t, "shape", 1<<20, 1<<20)},
		}.model(),
		err: `exec: node "expand" (Expand): float32 (1048576, 1048576) needs 4 TiB, over the memory budget of 4 GiB`,
	}, {
		name: "tile 8 TiB",
		model: graphSpec{
			nodes:   []*onnxpb.NodeProto{nodeP("tile", "Tile", []string{"x", "reps"}, []string{"y"})},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			inits:   []*onnxpb.TensorProto{initializer(t, "x", dense([]int{2}, float32(1), 2)), shapeInit(t, "reps", 1<<40)},
		}.model(),
		err: `exec: node "tile" (Tile): float32 (1099511627776, 2) needs 8 TiB, over the memory budget of 4 GiB`,
	}, {
		name: "tile overflow",
		model: graphSpec{
			nodes:   []*onnxpb.NodeProto{nodeP("tile", "Tile", []string{"x", "reps"}, []string{"y"})},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			inits:   []*onnxpb.TensorProto{initializer(t, "x", dense([]int{2}, float32(1), 2)), shapeInit(t, "reps", 1<<62)},
		}.model(),
		err: `exec: node "tile" (Tile): repeats [4611686018427387904]: axis 0 of size 2 repeated 4611686018427387904 times overflows`,
	}, {
		name: "range 8 TiB",
		model: graphSpec{
			nodes:   []*onnxpb.NodeProto{nodeP("range", "Range", []string{"zero", "limit", "one"}, []string{"y"})},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Int64)},
			inits: []*onnxpb.TensorProto{initializer(t, "zero", dense([]int{}, int64(0))),
				initializer(t, "limit", dense([]int{}, int64(1<<40))), initializer(t, "one", dense([]int{}, int64(1)))},
		}.model(),
		err: `exec: node "range" (Range): int64 (1099511627776,) needs 8 TiB, over the memory budget of 4 GiB`,
	}, {
		name: "where 1 TiB",
		model: graphSpec{
			nodes: []*onnxpb.NodeProto{
				filled(t, "cond", "colShape", dense([]int{1}, true)),
				filled(t, "row", "rowShape", f32one),
				nodeP("where", "Where", []string{"cond", "row", "zero"}, []string{"y"}),
			},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			inits: []*onnxpb.TensorProto{shapeInit(t, "colShape", 1<<20, 1), shapeInit(t, "rowShape", 1, 1<<18),
				initializer(t, "zero", dense([]int{}, float32(0)))},
		}.model(),
		err: `exec: node "where" (Where): float32 (1048576, 262144) needs 1 TiB, over the memory budget of 4 GiB (2 MiB already in use)`,
	}, {
		name: "gather 4 TiB",
		model: graphSpec{
			nodes: []*onnxpb.NodeProto{
				filled(t, "row", "rowShape", f32one),
				filled(t, "idx", "idxShape", dense([]int{1}, int64(0))),
				nodeP("gather", "Gather", []string{"row", "idx"}, []string{"y"}),
			},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			inits:   []*onnxpb.TensorProto{shapeInit(t, "rowShape", 1, 1<<20), shapeInit(t, "idxShape", 1<<20)},
		}.model(),
		err: `exec: node "gather" (Gather): float32 (1048576, 1048576) needs 4 TiB, over the memory budget of 4 GiB (12 MiB already in use)`,
	}, {
		name: "concat over a small budget",
		model: graphSpec{
			nodes: []*onnxpb.NodeProto{
				filled(t, "c", "shape", f32one),
				nodeP("cat", "Concat", []string{"c", "c", "c", "c", "c"}, []string{"y"}, intAttr("axis", 0)),
			},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			inits:   []*onnxpb.TensorProto{shapeInit(t, "shape", 1<<16)},
		}.model(),
		maxMemory: 1 << 20,
		err:       `exec: node "cat" (Concat): float32 (327680,) needs 1.2 MiB, over the memory budget of 1 MiB (256 KiB already in use)`,
	}, {
		name: "initializers over the budget",
		model: graphSpec{
			nodes:   []*onnxpb.NodeProto{nodeP("neg", "Neg", []string{"w"}, []string{"y"})},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			inits:   []*onnxpb.TensorProto{initializer(t, "w", tensor.New(tensor.WithShape(1<<10), tensor.WithBacking(make([]float32, 1<<10))))},
		}.model(),
		maxMemory: 1 << 10,
		err:       `exec: initializer "w": float32 (1024,) needs 4 KiB, over the memory budget of 1 KiB`,
	}, {
		name: "concat with an empty input name",
		model: graphSpec{
			nodes:   []*onnxpb.NodeProto{nodeP("cat", "Concat", []string{"x", ""}, []string{"y"}, intAttr("axis", 0))},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			inits:   []*onnxpb.TensorProto{initializer(t, "x", f32one)},
		}.model(),
		err: `exec: node "cat": op "Concat" needs input 1, which is empty`,
	}, {
		name: "max with an empty input name",
		model: graphSpec{
			nodes:   []*onnxpb.NodeProto{nodeP("max", "Max", []string{"x", "", "x"}, []string{"y"})},
			outputs: []*onnxpb.ValueInfoProto{untyped("y", onnxio.Float)},
			inits:   []*onnxpb.TensorProto{initializer(t, "x", f32one)},
		}.model(),
		err: `exec: node "max": op "Max" needs input 1, which is empty`,
	}}
}

// TestHostileModels runs each hostile model: New or Run must fail with
// the expected error, before allocating anything of the size asked for.
func TestHostileModels(t *testing.T) {
	for _, c := range hostileCases(t) {
		t.Run(c.name, func(t *testing.T) {
			g, err := NewWithOptions(c.model, Options{MaxMemory: c.maxMemory})
			if err == nil {
				_, err = g.Run(c.feeds)
			}
			if err == nil || err.Error() != c.err {
				t.Fatalf("got error %v\nwant %s", err, c.err)
			}
		})
	}
}
