package lift_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

func readFixture(t *testing.T, name string) *onnxpb.ModelProto {
	t.Helper()
	m, err := onnxio.ReadModel(filepath.Join(fixtures, name, "model.onnx"))
	require.NoError(t, err)
	return m
}

// node returns the k-th node (from 0) with the given op type.
func node(t *testing.T, m *onnxpb.ModelProto, op string, k int) *onnxpb.NodeProto {
	t.Helper()
	for _, n := range m.GetGraph().GetNode() {
		if n.GetOpType() == op {
			if k == 0 {
				return n
			}
			k--
		}
	}
	t.Fatalf("no %s node", op)
	return nil
}

// producer returns the node that writes a value.
func producer(t *testing.T, m *onnxpb.ModelProto, v string) *onnxpb.NodeProto {
	t.Helper()
	for _, n := range m.GetGraph().GetNode() {
		for _, o := range n.GetOutput() {
			if o == v {
				return n
			}
		}
	}
	t.Fatalf("nothing writes %q", v)
	return nil
}

// setConstant replaces the tensor of a Constant node.
func setConstant(t *testing.T, n *onnxpb.NodeProto, tp *onnxpb.TensorProto) {
	t.Helper()
	require.Equal(t, "Constant", n.GetOpType())
	n.Attribute[0].T = tp
}

func boolTensor(dims []int64, at func(i int) bool) *onnxpb.TensorProto {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	raw := make([]byte, n)
	for i := range raw {
		if at(i) {
			raw[i] = 1
		}
	}
	return &onnxpb.TensorProto{Dims: dims, DataType: proto.Int32(int32(onnxio.Bool)), RawData: raw}
}

func intsAttr(n *onnxpb.NodeProto, name string, v ...int64) {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			a.Ints = v
		}
	}
}

// TestBadAttentionIsReportedNotLifted takes graphs that look like
// attention but miss a piece, and checks that Lift names what is wrong
// instead of returning a model that computes something else.
func TestBadAttentionIsReportedNotLifted(t *testing.T) {
	cases := []struct {
		name    string
		fixture string
		edit    func(t *testing.T, m *onnxpb.ModelProto)
		reason  string
	}{
		{"no softmax", "causal_attention_opset17_static", func(t *testing.T, m *onnxpb.ModelProto) {
			sm := node(t, m, "Softmax", 0)
			sm.OpType, sm.Attribute = proto.String("Identity"), nil
		}, "op MatMul is not part of any attnrun layer"},
		{"softmax over the queries", "causal_attention_opset17_static", func(t *testing.T, m *onnxpb.ModelProto) {
			node(t, m, "Softmax", 0).Attribute[0].I = proto.Int64(1)
		}, "softmax over axis 1 of a rank-3 tensor: attention normalizes over the last axis"},
		{"mask of the wrong shape", "causal_attention_opset17_static", func(t *testing.T, m *onnxpb.ModelProto) {
			where := node(t, m, "Where", 0)
			setConstant(t, producer(t, m, where.Input[0]), boolTensor([]int64{1, 2, 6, 6}, func(i int) bool { return i%6 > i/6%6 }))
		}, "does not fit the scores of shape (2, 6, 6)"},
		{"mask that hides the past", "causal_attention_opset17_static", func(t *testing.T, m *onnxpb.ModelProto) {
			where := node(t, m, "Where", 0)
			setConstant(t, producer(t, m, where.Input[0]), boolTensor([]int64{6, 6}, func(i int) bool { return i%6 < i/6 }))
		}, "the mask is not causal: query 0, key 1 is visible"},
		{"mask on a dynamic graph that hides the past", "multihead_opset17_dynamic", func(t *testing.T, m *onnxpb.ModelProto) {
			slice := node(t, m, "Slice", 0)
			setConstant(t, producer(t, m, slice.Input[0]), boolTensor([]int64{8, 8}, func(i int) bool { return i%8 < i/8 }))
		}, "the mask is not causal"},
		{"scores scaled by 1/8", "causal_attention_opset17_static", func(t *testing.T, m *onnxpb.ModelProto) {
			pow := node(t, m, "Pow", 0)
			exp := producer(t, m, pow.Input[1])
			exp.Attribute[0].T = &onnxpb.TensorProto{DataType: proto.Int32(int32(onnxio.Float)), FloatData: []float32{1}}
		}, "the scores are scaled by 0.125"},
		{"keys split into interleaved heads", "multihead_opset17_static", func(t *testing.T, m *onnxpb.ModelProto) {
			// K reshaped to (B, T, 4, 2) and transposed so head h takes
			// columns h, h+2, ...: it runs, but the heads are not slices.
			reshape := node(t, m, "Reshape", 1)
			setConstant(t, producer(t, m, reshape.Input[1]), &onnxpb.TensorProto{Dims: []int64{4},
				DataType: proto.Int32(int32(onnxio.Int64)), Int64Data: []int64{2, 6, 4, 2}})
			for _, n := range m.GetGraph().GetNode() {
				if n.GetOpType() == "Transpose" && n.Input[0] == reshape.Output[0] {
					if n.Attribute[0].Ints[3] == 3 {
						intsAttr(n, "perm", 0, 3, 1, 2)
					} else {
						intsAttr(n, "perm", 0, 3, 2, 1)
					}
				}
			}
		}, "keys are not heads of the projection"},
		{"average by a wrong matrix", "causal_average_opset17_static", func(t *testing.T, m *onnxpb.ModelProto) {
			c := node(t, m, "Constant", 0)
			vals := make([]float32, 36)
			c.Attribute[0].T = &onnxpb.TensorProto{Dims: []int64{6, 6}, DataType: proto.Int32(int32(onnxio.Float)), FloatData: vals}
		}, "not the causal average"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := readFixture(t, c.fixture)
			c.edit(t, m)
			res, err := lift.Lift(m)
			var u *lift.UnliftedError
			require.ErrorAs(t, err, &u, "%v", err)
			require.NotNil(t, res)
			assert.Nil(t, res.Model)
			assert.Contains(t, u.Error(), c.reason)
		})
	}
}

func TestLiftRefusesWhatIsNotAGraph(t *testing.T) {
	_, err := lift.Lift(&onnxpb.ModelProto{IrVersion: proto.Int64(8)})
	assert.ErrorContains(t, err, "the model has no graph")

	m := readFixture(t, "causal_attention_opset17_static")
	m.OpsetImport = nil
	_, err = lift.Lift(m)
	assert.ErrorContains(t, err, "imports no default-domain")
}

// TestAttnrunFilesLoadLosslessly lifts a graph, exports the lifted model,
// and lifts the export: the file is recognized by its metadata and gives
// back the same config and weights.
func TestAttnrunFilesLoadLosslessly(t *testing.T) {
	res, err := lift.Lift(readFixture(t, "multihead_wrapper_opset15_dynamic"))
	require.NoError(t, err)
	exported, err := export.Model(res.Model, export.Options{})
	require.NoError(t, err)

	again, err := lift.Lift(exported)
	require.NoError(t, err)
	assert.True(t, again.Attnrun)
	assert.Equal(t, res.Config, again.Config)
	require.Len(t, again.StateDict, len(res.StateDict))
	for name, want := range res.StateDict {
		assert.Equal(t, want.Data(), again.StateDict[name].Data(), name)
	}
	checkDataSets(t, filepath.Join(fixtures, "multihead_wrapper_opset15_dynamic"), again)
}

func TestAttnrunFileVersions(t *testing.T) {
	res, err := lift.Lift(readFixture(t, "causal_attention_opset17_static"))
	require.NoError(t, err)
	exported, err := export.Model(res.Model, export.Options{})
	require.NoError(t, err)

	onnxio.SetMetadata(exported, export.MetadataVersion, "2")
	_, err = lift.Lift(exported)
	assert.ErrorContains(t, err, `attnrun format version "2" is not supported (this attnrun reads version "1")`)

	var kept []*onnxpb.StringStringEntryProto
	for _, e := range exported.MetadataProps {
		if e.GetKey() != export.MetadataVersion {
			kept = append(kept, e)
		}
	}
	exported.MetadataProps = kept
	_, _, err = lift.Load(exported)
	assert.ErrorContains(t, err, "has attnrun.config but no attnrun.version")
}

// TestAnnotateKeepsTheGraph writes a lifted model into its source graph
// (what import does when a layer has no exporter): the graph still runs,
// and the file loads back as the lifted model.
func TestAnnotateKeepsTheGraph(t *testing.T) {
	name := "torch_mha_causal_self_opset17_dynamic"
	res, err := lift.Lift(readFixture(t, name))
	require.NoError(t, err)
	annotated, err := lift.Annotate(readFixture(t, name), res)
	require.NoError(t, err)
	again, err := lift.Lift(annotated)
	require.NoError(t, err)
	assert.True(t, again.Attnrun)
	assert.Equal(t, res.Outputs, again.Outputs)
	checkDataSets(t, filepath.Join(fixtures, name), again)
	assert.True(t, strings.Contains(again.Config, "attention.multihead"))
}

// A graph input with a fixed dimension below 1, at any axis of any input
// (static and dynamic exports, a bool mask among them), is refused with an
// error naming the input, its shape and the axis; it used to crash the
// probe (an empty tensor) and came out as "internal error".
func TestLiftRefusesEmptyInputDims(t *testing.T) {
	for _, name := range []string{"causal_attention_opset17_static", "multihead_opset14_dynamic", "torch_mha_cross_opset17_dynamic"} {
		inputs := len(readFixture(t, name).GetGraph().GetInput())
		for in := 0; in < inputs; in++ {
			for axis := 0; axis < len(onnxio.Dims(readFixture(t, name).GetGraph().GetInput()[in])); axis++ {
				for _, size := range []int64{0, -1} {
					m := readFixture(t, name)
					vi := m.GetGraph().GetInput()[in]
					vi.GetType().GetTensorType().GetShape().Dim[axis].Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: size}
					_, err := lift.Lift(m)
					require.Error(t, err, "%s input %d axis %d size %d", name, in, axis, size)
					assert.NotContains(t, err.Error(), "internal error")
					assert.Contains(t, err.Error(), fmt.Sprintf("lift: input %q declares shape %s: dimension %d has size %d, want at least 1",
						vi.GetName(), onnxio.FormatDims(onnxio.Dims(vi)), axis, size))
				}
			}
		}
	}
}

// Graphs that used to crash the lifter (recovered as "internal error") get
// an error that says what is wrong with them.
func TestLiftHostileGraphs(t *testing.T) {
	for _, c := range []struct {
		name, fixture string
		edit          func(m *onnxpb.ModelProto)
		want          string
	}{
		{"declared shape overflows int64", "torch_mha_causal_self_opset17_dynamic", func(m *onnxpb.ModelProto) {
			dims := m.GetGraph().GetInput()[0].GetType().GetTensorType().GetShape().GetDim()
			for _, d := range dims[:2] {
				d.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 1 << 40}
			}
		}, `input "x" of shape (1099511627776, 1099511627776, 8) is too large to probe`},
		{"keys not projected, queries projected", "positional_self_attention_opset14_static", func(m *onnxpb.ModelProto) {
			node(t, m, "Transpose", 0).Input[0] = "/pos/Add_output_0"
		}, "cannot be lifted into attnrun layers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := readFixture(t, c.fixture)
			c.edit(m)
			_, err := lift.Lift(m)
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "internal error")
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
