package lift_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// The fixtures of testdata/export_kvcache_context_mask.py.
const (
	kvcacheContextMask      = "testdata/kvcache_context_mask"
	kvcacheContextMaskWhere = "testdata/kvcache_context_mask_where"
)

// TestLiftContextMask lifts blocks masked as Megatron's GPT-2 masks: a
// keep mask over the whole context, (B, 1, 16, 16), sliced at the KV
// cache's length to the new queries' rows and every key's column, and
// applied as s·m − (1 − m)·10000 (float32), or as torch.where(m, s, −Inf)
// (bool). Each lifts to mask.context and attention.sdpa with a bool keep
// mask, and the lifted model gives PyTorch's outputs and present cache
// within 1e-5 relative, 1e-6 absolute with a past of 3 tokens (the first
// sequence also hiding its second key) and with none, stepping the new
// tokens all at once, one by one and 3 at a time: each step cuts the rows
// at the cache offset.
func TestLiftContextMask(t *testing.T) {
	for _, dir := range []string{kvcacheContextMask, kvcacheContextMaskWhere} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			res := liftContextMask(t, dir)
			assert.Contains(t, res.Config, "{name: mask, type: mask.context, inputs: [x, attention_mask]}")
			assert.Contains(t, res.Config, "type: attention.sdpa, inputs: [x, mask], d: 16, num_heads: 2, qkv_bias: true, out_bias: true, causal: false, mask: bool, mask_polarity: keep}")
			megatron := slices.Contains(res.Notes, "1 mask(s) s·m − (1 − m)·c (Megatron's) were read as s + (m − 1)·c, the same weights for a keep mask m of 0s and 1s")
			assert.Equal(t, dir == kvcacheContextMask, megatron, "%q", res.Notes)
			checkDataSetsInChunks(t, dir, res)
		})
	}
}

// TestLiftContextMaskBlock lifts the block without a KV cache, whose mask
// is rows and columns 0..T of the (B, 1, 16, 16) input: mask.context
// again. The lifted model gives PyTorch's output within 1e-5 relative,
// 1e-6 absolute run whole and decoded 1 and 2 tokens a step (each step
// cuts the rows at its offset), and so does the file import writes, which
// is attnrun's own export (mask.context as Slices), on the executor, with
// the source's interface.
func TestLiftContextMaskBlock(t *testing.T) {
	dir := "testdata/context_mask_block"
	res := liftContextMask(t, dir)
	assert.Equal(t, []string{"mask.context", "attention.sdpa", "nn.add"}, layerTypes(res.Config))
	checkDataSets(t, dir, res)
	in, want, err := onnxio.ReadDataSetArrays(filepath.Join(dir, "test_data_set_0"))
	require.NoError(t, err)
	var args []*tensor.Dense
	feeds := map[string]*tensor.Dense{}
	for i, a := range in {
		d, err := a.Dense()
		require.NoError(t, err)
		args, feeds[res.Model.Config().Inputs[i]] = append(args, d), d
	}
	y, err := want[0].Dense()
	require.NoError(t, err)
	for _, chunk := range []int{1, 2} {
		got, err := res.Model.Decode(&registry.Run{Context: context.Background()}, chunk, args...)
		require.NoError(t, err)
		assertClose(t, y, got, fmt.Sprintf("decoded %d a step", chunk))
	}

	src, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	file, note, err := lift.Export(src, res, export.Options{})
	require.NoError(t, err)
	assert.Empty(t, note)
	requireSameInterface(t, src, file)
	g, err := exec.New(file)
	require.NoError(t, err)
	outs, err := g.Run(feeds)
	require.NoError(t, err)
	assertClose(t, y, outs["y"], "the written file")
}

// TestLiftMegatronGPT2Past lifts ONNX Runtime's Megatron GPT-2 test model
// (gpt2_megatron_past: input_ids, position_ids, a (B, 1, 64, 64)
// attention_mask sliced at the cache's length, past_0 (2, B, 2, P, 4))
// completely, and the lifted model gives ONNX Runtime's logits and
// present_0 (a past of 3 tokens, 7 new ones) within 1e-5 relative, 1e-6
// absolute, stepping the new tokens all at once, one by one and 3 at a
// time.
func TestLiftMegatronGPT2Past(t *testing.T) {
	dir := "../../../shared/realworld/ort-graphs/gpt2_megatron_past"
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("%s is absent (it comes with the project's shared material): %v", dir, err)
	}
	res := liftContextMask(t, dir)
	assert.Contains(t, res.Config, "{name: mask, type: mask.context, inputs: [norm, attention_mask]}")
	assert.Equal(t, res.Nodes, res.Lifted)
	checkDataSetsInChunks(t, dir, res)
}

// TestLiftContextMaskRefused changes the fixture so that its mask is no
// keep mask over the context: a fill of 100 (s·m − (1 − m)·100), which
// leaves a hidden key a weight, is not read as one and the softmax is
// refused; a block that starts one column in (columns 1..keys+1 of the
// input) does not follow the input's entries for the keys and is refused,
// and lifts with Partial, its attention kept as the ONNX nodes as written.
func TestLiftContextMaskRefused(t *testing.T) {
	src, err := onnxio.ReadModel(filepath.Join(kvcacheContextMask, "model.onnx"))
	require.NoError(t, err)
	t.Run("small fill", func(t *testing.T) {
		m := proto.Clone(src).(*onnxpb.ModelProto)
		fill := findNode(t, m, func(n *onnxpb.NodeProto) bool {
			v := n.GetAttribute()
			return n.GetOpType() == "Constant" && len(v) == 1 && v[0].GetT().GetDataType() == int32(onnxio.Float) && slices.Equal(floatsOf(t, v[0].GetT()), []float32{10000})
		})
		fill.GetAttribute()[0].GetT().RawData, fill.GetAttribute()[0].GetT().FloatData = nil, []float32{100}
		sub := findNode(t, m, func(n *onnxpb.NodeProto) bool { return n.GetOpType() == "Sub" && readBy(m, n, "Softmax") })
		_, err := lift.Lift(m)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "softmax over the output of node "+sub.GetName()+" (Sub), not over query-key scores")
	})
	t.Run("shifted block", func(t *testing.T) {
		m := proto.Clone(src).(*onnxpb.ModelProto)
		rows := findNode(t, m, func(n *onnxpb.NodeProto) bool { return n.GetOpType() == "Slice" && n.GetInput()[0] == "attention_mask" })
		columns := findNode(t, m, func(n *onnxpb.NodeProto) bool {
			return n.GetOpType() == "Slice" && n.GetInput()[0] == rows.GetOutput()[0]
		})
		shift := func(v, name string) string { // v + 1, a node before the column Slice
			add := &onnxpb.NodeProto{OpType: proto.String("Add"), Input: []string{v, "shift_one"}, Output: []string{name}}
			nodes := m.GetGraph().GetNode()
			i := slices.Index(nodes, columns)
			m.GetGraph().Node = slices.Insert(nodes, i, add)
			return name
		}
		m.GetGraph().Initializer = append(m.GetGraph().Initializer, &onnxpb.TensorProto{Name: proto.String("shift_one"),
			DataType: proto.Int32(int32(onnxio.Int64)), Dims: []int64{1}, Int64Data: []int64{1}})
		columns.Input[1] = shift(columns.GetInput()[1], "shifted_start")
		columns.Input[2] = shift(columns.GetInput()[2], "shifted_end")
		_, err := lift.Lift(m)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `attention: the mask from "attention_mask" does not follow it: query 0, key 0 of sequence 1, head 0 is kept where attention_mask[1, 0, 0, 0] is 0`)
		// kept as ONNX subgraphs, Megatron's mask computes as written
		res, err := lift.Options{Partial: true}.Lift(m)
		require.NoError(t, err)
		assert.NotEmpty(t, res.Unlifted)
	})
}

// findNode returns the node of m that is, failing the test when none is.
func findNode(t *testing.T, m *onnxpb.ModelProto, is func(*onnxpb.NodeProto) bool) *onnxpb.NodeProto {
	t.Helper()
	for _, n := range m.GetGraph().GetNode() {
		if is(n) {
			return n
		}
	}
	t.Fatal("no such node")
	return nil
}

// readBy reports whether a node of op reads n's output.
func readBy(m *onnxpb.ModelProto, n *onnxpb.NodeProto, op string) bool {
	for _, r := range m.GetGraph().GetNode() {
		if r.GetOpType() == op && slices.Contains(r.GetInput(), n.GetOutput()[0]) {
			return true
		}
	}
	return false
}

// floatsOf reads a float32 tensor's values.
func floatsOf(t *testing.T, tp *onnxpb.TensorProto) []float32 {
	t.Helper()
	d, err := onnxio.TensorToDense(tp)
	require.NoError(t, err)
	if f, ok := d.Data().(float32); ok {
		return []float32{f}
	}
	return d.Data().([]float32)
}

// pastLength is the tokens a packed past (2, B, H, P, hd) holds.
func pastLength(past map[string]*tensor.Dense) int {
	for _, p := range past {
		return p.Shape()[3]
	}
	return 0
}

// liftContextMask lifts dir/model.onnx completely.
func liftContextMask(t *testing.T, dir string) *lift.Result {
	t.Helper()
	src, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	res, err := lift.Lift(src)
	require.NoError(t, err, "%v", err)
	return res
}

// checkDataSetsInChunks runs the lifted decoder on every test-data set of
// dir, resumed from its past, the new tokens all at once, one by one and 3
// at a time, and compares each output with the set's.
func checkDataSetsInChunks(t *testing.T, dir string, res *lift.Result) {
	t.Helper()
	sets, err := onnxio.DataSetDirs(dir)
	require.NoError(t, err)
	require.NotEmpty(t, sets)
	for _, set := range sets {
		ds, err := onnxio.ReadDataSet(set)
		require.NoError(t, err)
		past := map[string]*tensor.Dense{}
		pasts := lift.CacheInputs(res.Outputs)
		own := len(ds.Inputs) - len(pasts)
		var args []*tensor.Dense
		for i, tp := range ds.Inputs {
			if i >= own && slices.Contains(tp.GetDims(), 0) { // no past tokens
				continue
			}
			x, err := onnxio.TensorToDense(tp)
			require.NoError(t, err)
			if i >= own {
				past[pasts[i-own]] = x
				continue
			}
			x, err = lift.ModelInput(x) // a bool mask as 0s and 1s
			require.NoError(t, err)
			args = append(args, x)
		}
		for _, chunk := range []int{0, 1, 3} {
			got, err := lift.RunCache(res.Model, res.Outputs, &registry.Run{Context: context.Background()}, args, past, chunk)
			require.NoError(t, err)
			require.Len(t, got, len(ds.Outputs))
			for i, tp := range ds.Outputs {
				want, err := onnxio.TensorToDense(tp)
				require.NoError(t, err)
				assertClose(t, want, got[i], fmt.Sprintf("%s output %q (past of %d, chunk %d)", filepath.Base(set), res.Outputs[i].Name, pastLength(past), chunk))
			}
		}
	}
}
