package lift_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
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

// liftFixtures lists every PyTorch export with test-data sets the lifter
// is tested on: testdata/onnx (export_onnx.py) and this package's
// testdata (export_more.py, attention_op.py), unbatched (T, d) exports
// included.
func liftFixtures(t *testing.T) []string {
	t.Helper()
	main, err := filepath.Glob(filepath.Join(fixtures, "*_opset*", "model.onnx"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(main), 90)
	more, err := filepath.Glob(filepath.Join("testdata", "*", "model.onnx"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(more), 19)
	var dirs []string
	for _, m := range append(main, more...) {
		dirs = append(dirs, filepath.Dir(m))
	}
	return dirs
}

// declared lists how a graph declares its inputs (those no initializer
// backs) and outputs: name, element type and every dimension.
func declared(m *onnxpb.ModelProto) (inputs, outputs []*onnxpb.ValueInfoProto) {
	g := m.GetGraph()
	inits := map[string]bool{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	for _, vi := range g.GetInput() {
		if !inits[vi.GetName()] {
			inputs = append(inputs, vi)
		}
	}
	return inputs, g.GetOutput()
}

// describeInfos prints value infos as "x float[2 6 8]" for messages.
func describeInfos(infos []*onnxpb.ValueInfoProto) string {
	parts := make([]string, len(infos))
	for i, vi := range infos {
		parts[i] = fmt.Sprintf("%s %s%s", vi.GetName(), onnxio.ElemType(vi), onnxio.FormatDims(onnxio.Dims(vi)))
	}
	return strings.Join(parts, ", ")
}

// assertSameInterface checks that two graphs declare the same inputs and
// outputs, in order, down to every field of their value infos.
func assertSameInterface(t *testing.T, want, got *onnxpb.ModelProto) {
	t.Helper()
	wantIn, wantOut := declared(want)
	gotIn, gotOut := declared(got)
	for _, side := range []struct {
		what      string
		want, got []*onnxpb.ValueInfoProto
	}{{"inputs", wantIn, gotIn}, {"outputs", wantOut, gotOut}} {
		same := len(side.want) == len(side.got)
		for i := 0; same && i < len(side.want); i++ {
			same = proto.Equal(side.want[i], side.got[i])
		}
		assert.True(t, same, "%s: the lifted file declares (%s), the source (%s)", side.what, describeInfos(side.got), describeInfos(side.want))
	}
}

// TestExportKeepsTheInterface lifts every fixture, writes it with Export
// and checks that the file is a drop-in replacement for the PyTorch
// export: the same declared inputs and outputs, and on the export's own
// test-data sets (unbatched (T, d) inputs, bool masks) PyTorch's outputs,
// both when the executor runs the written graph and when attnrun runs the
// layers Load rebuilds from it, at 1e-5 relative / 1e-6 absolute (the
// graph inputs that hold parameters bound into the layers first).
func TestExportKeepsTheInterface(t *testing.T) {
	for _, dir := range liftFixtures(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			src, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			res, err := lift.Lift(src)
			require.NoError(t, err)
			m, note, err := lift.Export(src, res, export.Options{})
			require.NoError(t, err)
			switch {
			case len(res.ParamInputs) > 0:
				assert.Contains(t, note, "takes weights as inputs")
			case len(res.Outputs) == 1:
				assert.Empty(t, note, "the model is exported as attnrun's own graph")
			case len(lift.CacheInputs(res.Outputs)) > 0:
				assert.Contains(t, note, "passes a KV cache in and out")
			default:
				assert.Contains(t, note, "which an export does not compute")
			}
			data, err := onnxio.EncodeModel(m)
			require.NoError(t, err)
			m, err = onnxio.DecodeModel(data, "", onnxio.DefaultLimits)
			require.NoError(t, err)
			assertSameInterface(t, src, m)

			g, err := exec.New(m)
			require.NoError(t, err)
			model, outputs, err := lift.Load(m)
			require.NoError(t, err)
			binds, err := lift.ReadParamInputs(m)
			require.NoError(t, err)
			bound := map[string]bool{}
			for _, b := range binds {
				bound[b.Input] = true
			}
			sets, err := onnxio.DataSetDirs(dir)
			require.NoError(t, err)
			require.NotEmpty(t, sets)
			srcInputs, srcOutputs := declared(src)
			for _, set := range sets {
				ds, err := onnxio.ReadDataSet(set)
				require.NoError(t, err)
				require.Len(t, ds.Inputs, len(srcInputs))
				if hasEmpty(ds.Inputs) {
					continue // a past of no tokens, which *tensor.Dense cannot hold: TestLiftKVCache runs it
				}
				feeds := map[string]*tensor.Dense{}
				var args []*tensor.Dense
				for i, tp := range ds.Inputs {
					x, err := onnxio.TensorToDense(tp)
					require.NoError(t, err)
					feeds[srcInputs[i].GetName()] = x
					if bound[srcInputs[i].GetName()] {
						continue // a parameter, bound below
					}
					x, err = lift.ModelInput(x)
					require.NoError(t, err)
					args = append(args, x)
				}
				byGraph, err := g.Run(feeds)
				require.NoError(t, err)
				require.NoError(t, lift.BindParamInputs(model, binds, feeds))
				byLayers, err := lift.RunOutputs(model, outputs, &registry.Run{}, args)
				require.NoError(t, err)
				require.Len(t, ds.Outputs, len(srcOutputs))
				for i, tp := range ds.Outputs {
					want, err := onnxio.TensorToDense(tp)
					require.NoError(t, err)
					name := srcOutputs[i].GetName()
					require.NotNil(t, byGraph[name], "the written graph has no output %q", name)
					assertClose(t, want, byGraph[name], filepath.Base(set)+" graph output "+name)
					assertClose(t, want, byLayers[i], filepath.Base(set)+" layers output "+name)
				}
			}
		})
	}
}

// hasEmpty reports whether a tensor of zero elements is among ts.
func hasEmpty(ts []*onnxpb.TensorProto) bool {
	for _, t := range ts {
		if slices.Contains(t.GetDims(), 0) {
			return true
		}
	}
	return false
}
