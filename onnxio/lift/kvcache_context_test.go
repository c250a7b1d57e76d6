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
			megatron := slices.Contains(res.Notes, "1 mask(s) s·m − (1 − m)·c (Megatron's) were read as s + (1 − m)·(−c), the same weights for a keep mask m of 0s and 1s")
			assert.Equal(t, dir == kvcacheContextMask, megatron, "%q", res.Notes)
			checkDataSetsInChunks(t, dir, res)
		})
	}
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
// keep mask: a fill of 100 (s·m − (1 − m)·100), which leaves a hidden key
// a weight, is not read as one and the softmax is refused; a mask whose
// block starts one column in (columns 1..keys+1 of the input) does not
// follow the input's entries for the keys and is refused.
func TestLiftContextMaskRefused(t *testing.T) {
	src, err := onnxio.ReadModel(filepath.Join(kvcacheContextMask, "model.onnx"))
	require.NoError(t, err)
	for name, c := range map[string]struct {
		node string
		to   []int64
		fill float32
		want string
	}{
		"small fill":    {node: "/Constant_36", fill: 100, want: "softmax over the output of node /Sub_2 (Sub), not over query-key scores"},
		"shifted block": {node: "/Constant_31", to: []int64{1}, want: `attention: the mask from "attention_mask" does not follow it: query 0, key 0 of sequence 1, head 0 is kept where attention_mask[1, 0, 0, 0] is 0`},
	} {
		t.Run(name, func(t *testing.T) {
			m := proto.Clone(src).(*onnxpb.ModelProto)
			constant := findNode(t, m, c.node).GetAttribute()[0].GetT()
			if c.to != nil {
				constant.RawData, constant.Int64Data = nil, c.to
				shiftSliceEnd(t, m)
			} else {
				constant.RawData, constant.FloatData = nil, []float32{c.fill}
			}
			_, err := lift.Lift(m)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// shiftSliceEnd makes the column Slice of the fixture's mask end one
// column further, so that a block starting one column in keeps its width.
func shiftSliceEnd(t *testing.T, m *onnxpb.ModelProto) {
	t.Helper()
	slice := findNode(t, m, "/Slice_3")
	add := &onnxpb.NodeProto{Name: proto.String("/shift_end"), OpType: proto.String("Add"),
		Input: []string{slice.GetInput()[2], "shift_one"}, Output: []string{"shifted_end"}}
	m.GetGraph().Initializer = append(m.GetGraph().Initializer, &onnxpb.TensorProto{Name: proto.String("shift_one"),
		DataType: proto.Int32(int32(onnxio.Int64)), Dims: []int64{1}, Int64Data: []int64{1}})
	slice.Input[2] = "shifted_end"
	nodes := m.GetGraph().GetNode()
	for i, n := range nodes {
		if n == slice {
			m.GetGraph().Node = append(nodes[:i:i], append([]*onnxpb.NodeProto{add}, nodes[i:]...)...)
			return
		}
	}
}

// findNode returns the node of m named name.
func findNode(t *testing.T, m *onnxpb.ModelProto, name string) *onnxpb.NodeProto {
	t.Helper()
	for _, n := range m.GetGraph().GetNode() {
		if n.GetName() == name {
			return n
		}
	}
	t.Fatalf("no node %q", name)
	return nil
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
