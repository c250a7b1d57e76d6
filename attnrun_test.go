package attnrun_test

import (
	"context"
	"io/fs"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun"
	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/tensorio"
)

// The PyTorch export and test data the tests run (testdata/torch/export_onnx.py).
const (
	torchONNX = "testdata/onnx/multihead_opset17_dynamic/model.onnx"
	torchData = "testdata/onnx/multihead_opset17_dynamic/test_data_set_0/"
	config    = "testdata/export/causal.yaml" // attention.causal, d_in 4
)

func input(t *testing.T, shape ...int) *tensor.Dense {
	t.Helper()
	n := tensor.Shape(shape).TotalSize()
	data := make([]float32, n)
	for i := range data {
		data[i] = float32(math.Sin(float64(i)*0.7)) * 0.9
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

func readTensor(t *testing.T, path string) *tensor.Dense {
	t.Helper()
	x, err := attnrun.ReadTensor(path)
	require.NoError(t, err)
	return x
}

// A PyTorch export runs on the executor and gives PyTorch's output; float64
// inputs are converted to the float32 the graph declares.
func TestLoadTorchExport(t *testing.T) {
	m, err := attnrun.Load(torchONNX)
	require.NoError(t, err)
	assert.Nil(t, m.Layers(), "a PyTorch export runs on the executor")
	assert.Equal(t, []string{"x"}, m.Inputs())
	assert.Equal(t, []string{"y"}, m.Outputs())
	assert.Equal(t, torchONNX, m.Name())

	x, want := readTensor(t, torchData+"input_0.pb"), readTensor(t, torchData+"output_0.pb")
	y, err := m.Forward(context.Background(), x)
	require.NoError(t, err)
	c, err := attnrun.Compare(y, want, 1e-5, 1e-6)
	require.NoError(t, err)
	assert.True(t, c.OK(), "%v", c)

	x64 := tensor.New(tensor.WithShape(x.Shape()...), tensor.WithBacking(widen(x.Data().([]float32))))
	y64, err := m.Forward(context.Background(), x64)
	require.NoError(t, err)
	assert.Equal(t, y.Data(), y64.Data(), "a float64 input is rounded to the float32 the graph takes")

	_, err = m.AttentionWeights(context.Background(), x)
	assert.ErrorContains(t, err, "runs on the ONNX executor, which reports no attention weights")
	_, _, err = m.StateDict()
	assert.ErrorContains(t, err, "its weights are graph initializers")
}

func widen(s []float32) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = float64(v)
	}
	return out
}

// A config runs on layers once it has weights; StateDict gives what
// WriteNPZ takes, and WithWeights loads it back.
func TestLoadConfig(t *testing.T) {
	x := input(t, 2, 5, 4)
	ctx := context.Background()

	bare, err := attnrun.Load(config)
	require.NoError(t, err)
	_, err = bare.Forward(ctx, x)
	assert.EqualError(t, err, `model "export-causal" (testdata/export/causal.yaml) has no weights: load it with attnrun.WithWeights(path) or attnrun.WithSeed(seed)`)

	seeded, err := attnrun.Load(config, attnrun.WithSeed(123))
	require.NoError(t, err)
	require.NotNil(t, seeded.Layers())
	y, err := seeded.Forward(ctx, x)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 5, 4}, []int(y.Shape()))

	// The seeded weights are models' Init(123), PyTorch's manual_seed(123).
	ref, err := models.Load(config)
	require.NoError(t, err)
	require.NoError(t, ref.Init(123))
	refY, err := ref.Forward(nil, x)
	require.NoError(t, err)
	assert.Equal(t, refY.Data(), y.Data())

	names, tensors, err := seeded.StateDict()
	require.NoError(t, err)
	assert.Equal(t, []string{"attn.W_query.weight", "attn.W_query.bias", "attn.W_key.weight", "attn.W_key.bias", "attn.W_value.weight", "attn.W_value.bias"}, names)
	path := filepath.Join(t.TempDir(), "w.npz")
	require.NoError(t, tensorio.WriteNPZ(path, names, tensors))
	loaded, err := attnrun.Load(config, attnrun.WithWeights(path))
	require.NoError(t, err)
	again, err := loaded.Forward(ctx, x)
	require.NoError(t, err)
	assert.Equal(t, y.Data(), again.Data())

	// StateDict hands out copies: writing into them changes nothing.
	tensors[0].Data().([]float32)[0] = 1000
	after, err := seeded.Forward(ctx, x)
	require.NoError(t, err)
	assert.Equal(t, y.Data(), after.Data())
}

// An ONNX file attnrun wrote runs on the layers it holds, with its weights,
// and on the executor when asked; both agree with the model exported.
func TestLoadAttnrunONNX(t *testing.T) {
	src, err := models.Load(config)
	require.NoError(t, err)
	require.NoError(t, src.Init(7))
	file, err := export.Model(src, export.Options{})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "causal.onnx")
	require.NoError(t, onnxio.WriteModel(path, file))

	x := input(t, 2, 5, 4)
	want, err := src.Forward(nil, x)
	require.NoError(t, err)

	onLayers, err := attnrun.Load(path)
	require.NoError(t, err)
	require.NotNil(t, onLayers.Layers(), "a file attnrun wrote becomes layers again")
	got, err := onLayers.Forward(context.Background(), x)
	require.NoError(t, err)
	assert.Equal(t, want.Data(), got.Data())
	weights, err := onLayers.AttentionWeights(context.Background(), x)
	require.NoError(t, err)
	require.Len(t, weights, 1)
	assert.Equal(t, "attn", weights[0].Layer)
	assert.Equal(t, []int{2, 1, 5, 5}, []int(weights[0].Weights.Shape()))

	onGraph, err := attnrun.Load(path, attnrun.WithExecutor())
	require.NoError(t, err)
	assert.Nil(t, onGraph.Layers())
	got, err = onGraph.Forward(context.Background(), x)
	require.NoError(t, err)
	assert.True(t, attnrun.AllClose(got, want, 1e-5, 1e-6))

	_, err = attnrun.Load(path, attnrun.WithExecutor(), attnrun.WithSeed(1))
	assert.ErrorContains(t, err, "the weights of an ONNX graph are its initializers")
}

// A preset loads with its embedded weights (Example checks the weights of
// seed-masked-weights against the notebook's printout).
func TestLoadPreset(t *testing.T) {
	m, err := attnrun.Load("seed-mha-wrapper")
	require.NoError(t, err)
	x := input(t, 2, 6, 3)
	weights, err := m.AttentionWeights(context.Background(), x)
	require.NoError(t, err)
	require.Len(t, weights, 1)
	assert.Equal(t, "attn", weights[0].Layer)
	assert.Equal(t, []int{2, 2, 6, 6}, []int(weights[0].Weights.Shape()), "the wrapper reports its two heads together")
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		path string
		opts []attnrun.Option
		want string
	}{
		{"w.npz", nil, "w.npz is a state dict, not a model: pass it with attnrun.WithWeights to Load of a model config"},
		{"x.npy", nil, "x.npy is a tensor, not a model: read it with attnrun.ReadTensor and pass it to Forward"},
		{"model.txt", nil, "model.txt: want a model config (.yaml, .yml), an ONNX file (.onnx) or a preset name"},
		{dir, nil, dir + ": want a model config (.yaml, .yml), an ONNX file (.onnx) or a preset name"},
		{"seed-nope", nil, `unknown preset "seed-nope"; available: seed-simple`},
		{"missing.yaml", nil, "missing.yaml: no such file or directory"},
		{config, []attnrun.Option{attnrun.WithSeed(1), attnrun.WithWeights("w.npz")}, "attnrun.Load: WithWeights and WithSeed both set the weights; give one"},
		{torchONNX, []attnrun.Option{attnrun.WithWeights("w.npz")}, "the weights of an ONNX graph are its initializers"},
		{config, []attnrun.Option{attnrun.WithWeights(torchONNX)}, "unknown weights format"},
	} {
		_, err := attnrun.Load(c.path, c.opts...)
		assert.ErrorContains(t, err, c.want, c.path)
	}
}

// Forward checks its inputs against the model and converts float64; a
// done context stops the run, on layers and on the executor.
func TestForwardInputs(t *testing.T) {
	m, err := attnrun.Load(config, attnrun.WithSeed(1))
	require.NoError(t, err)
	ctx := context.Background()
	x := input(t, 1, 3, 4)

	_, err = m.Forward(ctx)
	assert.EqualError(t, err, `model "export-causal" takes 1 input(s) (x), got 0`)
	_, err = m.Forward(ctx, nil)
	assert.EqualError(t, err, `model "export-causal": input "x" is nil`)
	ints := tensor.New(tensor.WithShape(1, 3, 4), tensor.WithBacking(make([]int64, 12)))
	_, err = m.Forward(ctx, ints)
	assert.EqualError(t, err, `model "export-causal": input "x": dtype int64, want float32 or float64`)

	y32, err := m.Forward(ctx, x)
	require.NoError(t, err)
	x64 := tensor.New(tensor.WithShape(1, 3, 4), tensor.WithBacking(widen(x.Data().([]float32))))
	y64, err := m.Forward(ctx, x64)
	require.NoError(t, err)
	assert.Equal(t, y32.Data(), y64.Data())

	// A strided view is read as the tensor it shows.
	wide := input(t, 1, 3, 8)
	view, err := wide.Slice(nil, nil, tensor.S(0, 4))
	require.NoError(t, err)
	fromView, err := m.Forward(ctx, view.(*tensor.Dense))
	require.NoError(t, err)
	copied := view.(*tensor.Dense).Materialize().(*tensor.Dense)
	fromCopy, err := m.Forward(ctx, copied)
	require.NoError(t, err)
	assert.Equal(t, fromCopy.Data(), fromView.Data())

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = m.Forward(canceled, x)
	assert.ErrorIs(t, err, context.Canceled)
	graph, err := attnrun.Load(torchONNX)
	require.NoError(t, err)
	_, err = graph.Forward(canceled, readTensor(t, torchData+"input_0.pb"))
	assert.ErrorIs(t, err, context.Canceled)
}

// WithMaxMemory bounds what reading the file and the executor's runs hold.
func TestMaxMemory(t *testing.T) {
	_, err := attnrun.Load(torchONNX, attnrun.WithMaxMemory(1024))
	require.Error(t, err)
	assert.ErrorIs(t, err, attnrun.ErrMemoryBudget)
	assert.True(t, strings.HasPrefix(err.Error(), torchONNX), err.Error())
}

func TestCompare(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	vec := func(v ...float32) *tensor.Dense { return tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(v)) }
	for _, c := range []struct {
		name       string
		got, want  *tensor.Dense
		mismatches int
		worst      int
		maxAbs     float64
	}{
		{"equal", vec(1, 2), vec(1, 2), 0, -1, 0},
		{"within tolerance", vec(1, 2.00001), vec(1, 2), 0, -1, 1.0013580322265625e-05},
		{"NaN matches NaN", vec(nan, 1), vec(nan, 1), 0, -1, 0},
		{"NaN against a number", vec(nan, 1), vec(0, 1), 1, 0, math.Inf(1)},
		{"a number against NaN", vec(0, 1), vec(nan, 1), 1, 0, math.Inf(1)},
		{"infinity matches itself", vec(inf, -inf), vec(inf, -inf), 0, -1, 0},
		{"opposite infinities", vec(inf), vec(-inf), 1, 0, math.Inf(1)},
		{"infinity against a number", vec(1, 2), vec(1, inf), 1, 1, math.Inf(1)},
		{"worst of two", vec(1.1, 5), vec(1, 4), 2, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmp, err := attnrun.Compare(c.got, c.want, 1e-5, 1e-6)
			require.NoError(t, err)
			assert.Equal(t, c.mismatches, cmp.Mismatches)
			assert.Equal(t, c.worst, cmp.Worst)
			assert.Equal(t, c.maxAbs, cmp.MaxAbs)
			assert.False(t, math.IsNaN(cmp.MaxRel))
			assert.Equal(t, c.mismatches == 0, attnrun.AllClose(c.got, c.want, 1e-5, 1e-6))
		})
	}

	// A float32 result against a float64 reference compares values.
	ref := tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{0.1, 0.2}))
	assert.True(t, attnrun.AllClose(vec(0.1, 0.2), ref, 1e-7, 0))
	_, err := attnrun.Compare(vec(1, 2), vec(1, 2, 3), 1e-5, 1e-6)
	assert.EqualError(t, err, "compare: shape (2,), the reference has (3,)")
	assert.False(t, attnrun.AllClose(vec(1, 2), vec(1, 2, 3), 1, 1))
	_, err = attnrun.Compare(nil, vec(1), 0, 0)
	assert.EqualError(t, err, "compare: a tensor is nil")
}

func TestReadTensor(t *testing.T) {
	x := readTensor(t, torchData+"input_0.pb")
	path := filepath.Join(t.TempDir(), "x.npy")
	require.NoError(t, tensorio.WriteNPYFile(path, x))
	again := readTensor(t, path)
	assert.Equal(t, x.Data(), again.Data())
	_, err := attnrun.ReadTensor("x.txt")
	assert.EqualError(t, err, "x.txt: want a .npy array or a .pb TensorProto")
	_, err = attnrun.ReadTensor("missing.npy")
	assert.ErrorIs(t, err, fs.ErrNotExist)

	// Both formats are read within the budget.
	for _, p := range []string{path, torchData + "input_0.pb"} {
		_, err = attnrun.ReadTensor(p, attnrun.WithMaxMemory(64))
		assert.ErrorIs(t, err, attnrun.ErrMemoryBudget, p)
	}

	// ReadArray reads what a *tensor.Dense cannot hold.
	empty := filepath.Join(t.TempDir(), "empty.npy")
	require.NoError(t, tensorio.WriteNPYArrayFile(empty, &array.Array{DType: array.Float16, Shape: []int{0, 3}, Data: []float32{}}))
	a, err := attnrun.ReadArray(empty)
	require.NoError(t, err)
	assert.Equal(t, "float16 (0, 3)", a.String())
	_, err = attnrun.ReadTensor(empty)
	assert.EqualError(t, err, empty+": array: float16 (0, 3) has zero elements, which *tensor.Dense cannot hold (attnrun.ReadArray reads it)")
}

// CompareArrays holds every element type: integers and bools exactly
// (beyond 2^53 too), narrow floats at their epsilon, empty tensors by shape.
func TestCompareArrays(t *testing.T) {
	big := int64(1) << 53
	c, err := attnrun.CompareArrays(array.FromSlice([]int{2}, []int64{big + 1, 3}), array.FromSlice([]int{2}, []int64{big, 3}), 1, 1)
	require.NoError(t, err)
	assert.False(t, c.OK(), "2^53+1 is not 2^53, though float64 cannot tell them apart")
	assert.Equal(t, 1, c.Mismatches)

	c, err = attnrun.CompareArrays(array.FromSlice([]int{2}, []uint64{math.MaxUint64, 0}), array.FromSlice([]int{2}, []uint64{math.MaxUint64, 0}), 0, 0)
	require.NoError(t, err)
	assert.True(t, c.OK())
	c, err = attnrun.CompareArrays(array.FromSlice([]int{1}, []int64{math.MinInt64}), array.FromSlice([]int{1}, []uint64{1 << 63}), 0, 0)
	require.NoError(t, err)
	assert.False(t, c.OK(), "-2^63 is not 2^63")

	c, err = attnrun.CompareArrays(array.FromSlice([]int{3}, []bool{true, false, true}), array.FromSlice([]int{3}, []bool{true, true, true}), 0, 0)
	require.NoError(t, err)
	assert.Equal(t, attnrun.Comparison{MaxAbs: 1, MaxRel: 1, Worst: 1, Mismatches: 1, Elements: 3, Exact: true}, c)
	c, err = attnrun.CompareArrays(array.FromSlice([]int{3}, []int32{1, 5, 100}), array.FromSlice([]int{3}, []int32{1, 6, 90}), 1, 100)
	require.NoError(t, err)
	assert.Equal(t, attnrun.Comparison{MaxAbs: 10, MaxRel: 1.0 / 6, Worst: 1, Mismatches: 2, Elements: 3, Exact: true}, c,
		"integers must be equal whatever the tolerance; the first that differs is reported")

	h := func(x ...float32) *array.Array {
		return &array.Array{DType: array.Float16, Shape: []int{len(x)}, Data: x}
	}
	c, err = attnrun.CompareArrays(h(1+0x1p-10, 2), h(1, 2), 1e-5, 1e-6)
	require.NoError(t, err)
	assert.True(t, c.OK(), "one float16 ulp at 1 is within float16's epsilon")
	assert.Equal(t, 0x1p-10, c.RTol)
	c, err = attnrun.CompareArrays(h(1+3*0x1p-10), h(1), 1e-5, 1e-6)
	require.NoError(t, err)
	assert.False(t, c.OK(), "three ulps are not: atol + rtol·1 is two")

	c, err = attnrun.CompareArrays(array.FromSlice([]int{0, 3}, []float32{}), array.FromSlice([]int{0, 3}, []float32{}), 0, 0)
	require.NoError(t, err)
	assert.True(t, c.OK())
	_, err = attnrun.CompareArrays(array.FromSlice([]int{0, 3}, []float32{}), array.FromSlice([]int{3, 0}, []float32{}), 0, 0)
	assert.EqualError(t, err, "shape (0, 3), want (3, 0)")
	_, err = attnrun.CompareArrays(nil, h(1), 0, 0)
	assert.EqualError(t, err, "array: nil *Array")
}
