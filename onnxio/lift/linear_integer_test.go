package lift_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// The fixtures of testdata/export_linear_integer.py, with ONNX Runtime's
// outputs.
const (
	integerColumns = "testdata/linear_integer_u8s8_columns"
	integerTensor  = "testdata/linear_integer_u8s8_tensor"
	integerInputs  = "testdata/linear_integer_u8u8_inputs"
)

// liftedRun runs a lifted model on a data set's inputs as the command line
// runs a lifted file: the inputs that hold parameters bound first, the
// others converted to model inputs; the past inputs of a KV cache, when
// the model has one, passed to RunCache.
func liftedRun(t *testing.T, res *lift.Result, names []string, in []*array.Array) []*tensor.Dense {
	t.Helper()
	bound := map[string]bool{}
	for _, b := range res.ParamInputs {
		bound[b.Input] = true
	}
	past := lift.CacheInputs(res.Outputs)
	feeds, cache := map[string]*tensor.Dense{}, map[string]*tensor.Dense{}
	var args []*tensor.Dense
	for i, name := range names {
		d, err := in[i].Dense()
		require.NoError(t, err, name)
		switch {
		case bound[name]:
			feeds[name] = d
		case slices.Contains(past, name):
			cache[name] = d
		default:
			x, err := lift.ModelInput(d)
			require.NoError(t, err, name)
			args = append(args, x)
		}
	}
	require.NoError(t, lift.BindParamInputs(res.Model, res.ParamInputs, feeds))
	run := &registry.Run{Context: context.Background()}
	if len(past) > 0 {
		got, err := lift.RunCache(res.Model, res.Outputs, run, args, cache, 0)
		require.NoError(t, err)
		return got
	}
	got, err := lift.RunOutputs(res.Model, res.Outputs, run, args)
	require.NoError(t, err)
	return got
}

// inputNames lists a graph's inputs that no initializer backs.
func inputNames(t *testing.T, dir string) []string {
	t.Helper()
	g, err := exec.New(readModel(t, dir))
	require.NoError(t, err)
	var names []string
	for _, info := range g.Inputs() {
		names = append(names, info.Name)
	}
	return names
}

// readModel reads a fixture folder's model.onnx.
func readModel(t *testing.T, dir string) *onnxpb.ModelProto {
	t.Helper()
	m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	return m
}

// TestLiftLinearInteger lifts ONNX Runtime's quantized Linear,
// MatMulInteger of uint8 tokens with its zero points, Cast, Mul by
// input_scale·weight_scale and Add of the bias, into nn.linear_integer:
// with an int8 weight and per-column scales and zero points held as
// initializers; with one weight scale for the whole tensor and no zero
// points; and with a uint8 weight and every parameter a graph
// input, the weight's scale and zero point declared of symbolic size [C],
// fed once per column and once for the whole tensor. The lifted model
// gives ONNX Runtime's outputs bit for bit (the layer computes what the
// graph computes, in its order); so does the file written back, on the
// layers and, exported as MatMulInteger again, on the executor. A weight
// zero point off by one (an input scale 1% off without zero points)
// changes the output.
func TestLiftLinearInteger(t *testing.T) {
	for _, c := range []struct {
		dir      string
		config   string
		binds    []string
		exported bool
	}{
		{dir: integerColumns, config: "{name: linear, type: nn.linear_integer, d_in: 16, d_out: 24, bias: true, per_channel: true, input_type: uint8, weight_type: int8}", exported: true},
		{dir: integerTensor, config: "{name: linear, type: nn.linear_integer, d_in: 16, d_out: 24, bias: true, per_channel: false, input_type: uint8, weight_type: int8}", exported: true},
		{dir: integerInputs, config: "{name: linear, type: nn.linear_integer, d_in: 16, d_out: 24, bias: true, per_channel: true, input_type: uint8, weight_type: uint8}",
			binds: []string{"W -> linear.weight (transposed)", "b -> linear.bias", "x_scale -> linear.input_scale", "x_zero_point -> linear.input_zero_point",
				"w_scale -> linear.weight_scale (fill)", "w_zero_point -> linear.weight_zero_point (fill)"}},
	} {
		t.Run(filepath.Base(c.dir), func(t *testing.T) {
			src := readModel(t, c.dir)
			res, err := lift.Lift(src)
			require.NoError(t, err)
			assert.Contains(t, res.Config, c.config)
			assert.Equal(t, res.Nodes, res.Lifted)
			var binds []string
			for _, b := range res.ParamInputs {
				s := b.Input + " -> " + b.Param
				if b.Transposed {
					s += " (transposed)"
				}
				if b.Fill {
					s += " (fill)"
				}
				binds = append(binds, s)
			}
			assert.ElementsMatch(t, c.binds, binds)

			file, _, err := lift.Export(src, res, export.Options{})
			require.NoError(t, err)
			requireSameInterface(t, src, file)
			m, outputs, err := lift.Load(file)
			require.NoError(t, err)
			binds2, err := lift.ReadParamInputs(file)
			require.NoError(t, err)
			written := &lift.Result{Model: m, Outputs: outputs, ParamInputs: binds2}
			names := inputNames(t, c.dir)
			for _, set := range []string{"test_data_set_0", "test_data_set_1"} {
				in, want, err := onnxio.ReadDataSetArrays(filepath.Join(c.dir, set))
				require.NoError(t, err)
				wy, err := want[0].Dense()
				require.NoError(t, err)
				for i, r := range []*lift.Result{res, written} {
					got := liftedRun(t, r, names, in)
					assert.Equal(t, wy.Data(), got[0].Data(), "%s: lifted model %d gives ONNX Runtime's output bit for bit", set, i)
				}
				if c.exported { // the file is attnrun's own graph: MatMulInteger again
					g, err := exec.New(file)
					require.NoError(t, err)
					outs, err := g.RunArrays(context.Background(), map[string]*array.Array{names[0]: in[0]})
					require.NoError(t, err)
					gy, err := outs["y"].Dense()
					require.NoError(t, err)
					assert.Equal(t, wy.Data(), gy.Data(), "%s: the exported graph on the executor", set)
				}
			}

			in, want, err := onnxio.ReadDataSetArrays(filepath.Join(c.dir, "test_data_set_0"))
			require.NoError(t, err)
			for _, p := range res.Model.Params() {
				switch {
				case len(c.binds) > 0:
				case c.dir == integerTensor && p.Name == "linear.input_scale":
					p.Value.Data().([]float32)[0] *= 1.01
				case c.dir == integerColumns && p.Name == "linear.weight_zero_point":
					p.Value.Data().([]float32)[3]++
				}
			}
			if len(c.binds) > 0 {
				zp := in[slices.Index(names, "w_zero_point")].Data.([]uint8)
				zp[3]++
			}
			res.Model.ParamsChanged()
			wy, err := want[0].Dense()
			require.NoError(t, err)
			assert.NotEqual(t, wy.Data(), liftedRun(t, res, names, in)[0].Data(), "a weight zero point changed changes the output")
		})
	}
}

// TestLiftQuantizedAttentionRealWorld lifts ONNX Runtime's quantized
// GPT-2 attention test graph (attn_past_state_u8s8: uint8 tokens, an int8
// weight fed as an input with per-column scales and zero points, a packed
// past and present): nn.linear_integer, then attention.multihead reading
// the packed queries, keys and values; the parameters are bound from the
// graph inputs, the scales and zero points declared [C] filling from one
// value too. The lifted model gives ONNX Runtime's output and present
// within 1e-5 relative, 1e-6 absolute.
func TestLiftQuantizedAttentionRealWorld(t *testing.T) {
	dir := "../../../shared/realworld/ort-graphs/attn_past_state_u8s8"
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("%s is absent (it comes with the project's shared material): %v", dir, err)
	}
	src := readModel(t, dir)
	res, err := lift.Lift(src)
	require.NoError(t, err)
	assert.Equal(t, []string{"nn.linear_integer", "attention.multihead"}, layerTypes(res.Config), res.Config)
	assert.Equal(t, res.Nodes, res.Lifted)
	fills := map[string]bool{}
	for _, b := range res.ParamInputs {
		fills[b.Input] = b.Fill
	}
	assert.Equal(t, map[string]bool{"weight": false, "bias": false, "input_scale": false, "input_zero_point": false, "weight_scale": true, "weight_zero_point": true}, fills)
	assert.Contains(t, strings.Join(res.Notes, "\n"), "W_query, W_key and W_value select those columns")

	names := inputNames(t, dir)
	in, want, err := onnxio.ReadDataSetArrays(filepath.Join(dir, "test_data_set_0"))
	require.NoError(t, err)
	got := liftedRun(t, res, names, in)
	require.Len(t, got, 2)
	for i, w := range want {
		wd, err := w.Dense()
		require.NoError(t, err)
		assertClose(t, wd, got[i], fmt.Sprintf("output %d", i))
	}
}
