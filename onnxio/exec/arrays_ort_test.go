package exec

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
)

// arrayCases are the models testdata/arrays/gen.py writes, with ONNX
// Runtime 1.30's outputs (testdata/ort/run_cases.mjs).
const arrayCases = "testdata/arrays"

// runArrayCase runs a case through RunArrays and returns the outputs and
// ONNX Runtime's, by output name.
func runArrayCase(t *testing.T, name string) (g *Graph, inputs, got, want map[string]*array.Array) {
	t.Helper()
	return runArrayCaseDir(t, filepath.Join(arrayCases, name))
}

func runArrayCaseDir(t *testing.T, dir string) (g *Graph, inputs, got, want map[string]*array.Array) {
	t.Helper()
	m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	g, err = New(m)
	require.NoError(t, err)
	ins, outs, err := onnxio.ReadDataSetArrays(filepath.Join(dir, "test_data_set_0"))
	require.NoError(t, err)
	require.Len(t, outs, len(g.Outputs()), "run_cases.mjs writes ONNX Runtime's outputs")
	inputs, want = map[string]*array.Array{}, map[string]*array.Array{}
	for i, info := range g.Inputs() {
		inputs[info.Name] = ins[i]
	}
	for i, info := range g.Outputs() {
		want[info.Name] = outs[i]
	}
	got, err = g.RunArrays(context.Background(), inputs)
	require.NoError(t, err)
	return g, inputs, got, want
}

// The first step of a decoder: a past of length 0, an empty Slice, a
// Split part of size 0, ReduceSum over an empty axes input, Shape and Exp
// of an empty tensor; every output as ONNX Runtime computes it.
func TestRunArraysEmptyTensorsMatchORT(t *testing.T) {
	g, inputs, got, want := runArrayCase(t, "empty_cache")
	for _, info := range g.Outputs() {
		w, o := want[info.Name], got[info.Name]
		require.NotNil(t, o, info.Name)
		assert.Equal(t, w.DType, o.DType, info.Name)
		assert.Equal(t, w.Shape, o.Shape, info.Name)
		assertArraysClose(t, info.Name, w, o, 1e-5, 1e-6)
	}
	assert.Equal(t, []int{1, 2, 3, 4}, got["present_key"].Shape)
	assert.Equal(t, []int{1, 2, 0, 4}, got["none"].Shape)
	assert.Equal(t, []int{1, 3, 0}, got["x_empty"].Shape)
	assert.Equal(t, []int64{1, 2, 0, 4}, got["past_shape"].Data)

	// *tensor.Dense cannot hold the empty past nor the empty outputs: Run
	// refuses them and says where to go.
	dense := map[string]*tensor.Dense{}
	x, err := inputs["x"].Dense()
	require.NoError(t, err)
	dense["x"] = x
	_, err = inputs["past_key"].Dense()
	require.Error(t, err)
	_, err = g.Run(dense)
	assert.ErrorContains(t, err, `missing input "past_key"`)
}

// A float16 transformer block (embedding, LayerNormalization, attention
// with a causal -inf mask, SiLU, Casts both ways) matches ONNX Runtime at
// float16's tolerance, and its outputs keep their declared types and hold
// float16 values.
func TestRunArraysFloat16MatchesORT(t *testing.T) {
	g, _, got, want := runArrayCase(t, "fp16_block")
	for _, info := range g.Outputs() {
		w, o := want[info.Name], got[info.Name]
		assert.Equal(t, info.DType, DType(o.DType), info.Name)
		assert.Equal(t, w.DType, o.DType, info.Name)
		assert.Equal(t, w.Shape, o.Shape, info.Name)
		// Four ulps of float16 at magnitude 1, relative and absolute.
		// attnrun rounds every op's result to float16, as ONNX's
		// semantics store it; ONNX Runtime computes runs of ops that have
		// no float16 kernel in float32 and rounds once (its
		// InsertCastTransformer), and fuses others. Each rounding moves a
		// value by half an ulp, and LayerNormalization and the softmax
		// amplify what reaches them: the two differ by up to 3e-3 here,
		// and both by as much from the float64 computation.
		eps := 4 * array.Float16.Epsilon()
		assertArraysClose(t, info.Name, w, o, eps, eps)
		if o.DType == array.Float16 {
			for _, x := range o.Data.([]float32) {
				require.Equal(t, x, array.Float16FromBits(array.Float16Bits(x)), "%s holds a value float16 cannot", info.Name)
			}
		}
	}
	assert.Equal(t, array.Float16, got["y"].DType)
	assert.Equal(t, array.Float32, got["y32"].DType)
	// A Cast to float16 is exact: ties to even, subnormals, overflow.
	assert.Equal(t, want["w16"].Data, got["w16"].Data)
	assert.Equal(t, []float32{1, 1 + 0x1p-9, 0x1p-20, float32(math.Inf(1)), 65504, -0.0999755859375}, got["w16"].Data)
}

// assertArraysClose compares two Arrays of one type elementwise as
// numpy.allclose does (NaN equal to NaN); integers must be equal.
func assertArraysClose(t *testing.T, name string, want, got *array.Array, rtol, atol float64) {
	t.Helper()
	w, err := fromArray(want)
	require.NoError(t, err)
	g, err := fromArray(got)
	require.NoError(t, err)
	wf, gf := castTo[float64](w.data), castTo[float64](g.data)
	require.Len(t, gf, len(wf), name)
	worst := 0.0
	for i := range wf {
		if math.IsNaN(wf[i]) && math.IsNaN(gf[i]) || wf[i] == gf[i] {
			continue
		}
		diff := math.Abs(gf[i] - wf[i])
		worst = math.Max(worst, diff)
		if !(diff <= atol+rtol*math.Abs(wf[i])) {
			t.Errorf("%s: element %d is %v, ONNX Runtime %v", name, i, gf[i], wf[i])
			return
		}
	}
	t.Logf("%s %s: max |diff| %.3g", name, got, worst)
}
