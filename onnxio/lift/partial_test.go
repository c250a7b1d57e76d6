package lift_test

import (
	"path/filepath"
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

// withRelu adds a Relu (no attnrun layer computes one) to a one-input,
// one-output fixture: after its output, or before everything reads its
// input.
func withRelu(t *testing.T, name string, before bool) *onnxpb.ModelProto {
	t.Helper()
	m := readFixture(t, name)
	g := m.GetGraph()
	x, y := g.GetInput()[0].GetName(), g.GetOutput()[0].GetName()
	if before {
		for _, n := range g.GetNode() {
			for i, in := range n.Input {
				if in == x {
					n.Input[i] = "x_relu"
				}
			}
		}
		relu := &onnxpb.NodeProto{Name: proto.String("/relu"), OpType: proto.String("Relu"), Input: []string{x}, Output: []string{"x_relu"}}
		g.Node = append([]*onnxpb.NodeProto{relu}, g.Node...)
		return m
	}
	for _, n := range g.GetNode() {
		for i, out := range n.Output {
			if out == y {
				n.Output[i] = "before_relu"
			}
		}
	}
	g.Node = append(g.Node, &onnxpb.NodeProto{Name: proto.String("/relu"), OpType: proto.String("Relu"), Input: []string{"before_relu"}, Output: []string{y}})
	return m
}

func TestPartialKeepsUnliftedNodesAsSubgraphs(t *testing.T) {
	for _, c := range []struct {
		name   string
		before bool
		types  []string
	}{
		{"causal_attention_opset17_dynamic", false, []string{"attention.causal", "onnx.subgraph"}},
		{"causal_attention_opset13_static", true, []string{"onnx.subgraph", "attention.causal"}},
		{"multihead_opset15_dynamic", true, []string{"onnx.subgraph", "attention.multihead"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := withRelu(t, c.name, c.before)
			res, err := lift.Lift(m)
			var u *lift.UnliftedError
			require.ErrorAs(t, err, &u)
			require.Equal(t, []lift.Unlifted{{Node: "/relu", Op: "Relu", Reason: "op Relu is not part of any attnrun layer"}}, u.Nodes)
			assert.Nil(t, res.Model)

			res, err = lift.Options{Partial: true}.Lift(m)
			require.NoError(t, err)
			require.NotNil(t, res.Model)
			assert.Equal(t, c.types, layerTypes(res.Config))
			assert.Len(t, res.Unlifted, 1)

			// The model, and its export (subgraphs written back as ONNX),
			// compute what the edited graph computes on the test inputs.
			g, err := exec.New(m)
			require.NoError(t, err)
			exported, err := export.Model(res.Model, export.Options{})
			require.NoError(t, err)
			eg, err := exec.New(exported)
			require.NoError(t, err)
			sets, err := onnxio.DataSetDirs(filepath.Join(fixtures, c.name))
			require.NoError(t, err)
			for _, set := range sets {
				ds, err := onnxio.ReadDataSet(set)
				require.NoError(t, err)
				x, err := onnxio.TensorToDense(ds.Inputs[0])
				require.NoError(t, err)
				want, err := g.Run(map[string]*tensor.Dense{"x": x})
				require.NoError(t, err)
				got, err := lift.RunOutputs(res.Model, res.Outputs, &registry.Run{}, []*tensor.Dense{x})
				require.NoError(t, err)
				assertClose(t, want["y"], got[0], "lifted "+set)
				fromExport, err := eg.Run(map[string]*tensor.Dense{"x": x})
				require.NoError(t, err)
				assertClose(t, want["y"], fromExport[export.OutputName], "exported "+set)
			}
		})
	}
}
