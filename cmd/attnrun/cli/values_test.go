package cli

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/tensorio"
)

// arrayCases are the executor's models of values *tensor.Dense cannot
// carry, with ONNX Runtime's outputs (onnxio/exec/testdata/arrays/gen.py):
// a decoder's first step with an empty KV cache and a float16 block.
const arrayCases = "../../../onnxio/exec/testdata/arrays"

// A graph of seven outputs, three of them empty and one int64, checks
// against ONNX Runtime's outputs: empty ones by shape, integers exactly.
func TestCheckEmptyAndIntegerOutputs(t *testing.T) {
	model := filepath.Join(arrayCases, "empty_cache", "model.onnx")
	status, out, stderr := attnrun("check", model)
	require.Equal(t, 0, status, out+stderr)
	assert.Contains(t, out, `output 1 "none"  ok    max_abs=0 max_rel=0 (empty float32 (1, 2, 0, 4))`)
	assert.Contains(t, out, `output 5 "past_shape"  ok    max_abs=0 max_rel=0 (int64, exact)`)
	assert.Contains(t, out, "7 passed, 0 failed")

	// A wrong integer fails, however small the tolerance would make it.
	dir := copyDataSet(t, filepath.Join(arrayCases, "empty_cache", "test_data_set_0"))
	writeOutput(t, dir, 5, "past_shape", &array.Array{DType: array.Int64, Shape: []int{4}, Data: []int64{1, 2, 5, 4}})
	status, out, _ = attnrun("check", model, "--data", dir, "--rtol", "1", "--atol", "10")
	assert.Equal(t, 1, status)
	assert.Contains(t, out, `output 5 "past_shape"  FAIL  1 of 4 elements differ (int64: exact; first at flat index 2: 0, want 5)`)

	// So does an empty output of another shape.
	writeOutput(t, dir, 1, "none", &array.Array{DType: array.Float32, Shape: []int{1, 0, 2, 4}, Data: []float32{}})
	_, out, _ = attnrun("check", model, "--data", dir)
	assert.Contains(t, out, `output 1 "none"  FAIL  shape (1, 2, 0, 4), want (1, 0, 2, 4)`)
}

// float16 outputs are compared at float16's epsilon at least; the flags
// widen it.
func TestCheckFloat16Outputs(t *testing.T) {
	model := filepath.Join(arrayCases, "fp16_block", "model.onnx")
	status, out, _ := attnrun("check", model)
	assert.Equal(t, 1, status, "ONNX Runtime computes parts of the block in float32: 3e-3 apart")
	assert.Contains(t, out, `output 3 "w16"  ok    max_abs=0 max_rel=0 (float16: rtol 0.000977, atol 0.000977)`)
	assert.Contains(t, out, `output 0 "y"  FAIL  max_abs=0.00293 max_rel=0.0092 (rtol 0.0009765625, atol 0.0009765625; worst at flat index 65)`)

	status, out, stderr := attnrun("check", model, "--rtol", "4e-3", "--atol", "4e-3")
	require.Equal(t, 0, status, out+stderr)
	assert.Contains(t, out, `output 0 "y"  ok    max_abs=0.00293 max_rel=0.0092`+"\n")
	assert.Contains(t, out, "4 passed, 0 failed")
}

// run prints every output of a graph, under its name, as PyTorch prints it.
func TestRunONNXPrintsEveryOutput(t *testing.T) {
	set := filepath.Join(arrayCases, "empty_cache", "test_data_set_0")
	status, out, stderr := attnrun("run", filepath.Join(arrayCases, "empty_cache", "model.onnx"),
		"--input", filepath.Join(set, "input_0.pb"), "--input", filepath.Join(set, "input_1.pb"))
	require.Equal(t, 0, status, stderr)
	for _, want := range []string{
		"present_key:\ntensor([[[[",
		"none:\ntensor([], size=(1, 2, 0, 4))\n",
		"x_empty:\ntensor([], size=(1, 3, 0))\n",
		"total:\ntensor([[[4.0042]]])\n",
		"past_shape:\ntensor([1, 2, 0, 4])\n",
	} {
		assert.Contains(t, out, want)
	}
	assert.Equal(t, 7, strings.Count(out, "tensor("))
}

// --output takes one file per output (.npy, or .pb keeping the ONNX
// type), or one directory or .npz for all of them.
func TestRunONNXWritesEveryOutput(t *testing.T) {
	model := filepath.Join(arrayCases, "fp16_block", "model.onnx")
	set := filepath.Join(arrayCases, "fp16_block", "test_data_set_0")
	inputs := []string{"--input", filepath.Join(set, "input_0.pb"), "--input", filepath.Join(set, "input_1.pb"), "--input", filepath.Join(set, "input_2.pb")}
	_, want, err := onnxio.ReadDataSetArrays(set)
	require.NoError(t, err)
	tmp := t.TempDir()

	// A directory: <output name>.npy each, float16 as NumPy's float16.
	dir := filepath.Join(tmp, "outs")
	status, _, stderr := attnrun(append([]string{"run", model, "-o", dir}, inputs...)...)
	require.Equal(t, 0, status, stderr)
	for i, name := range []string{"y", "p", "y32", "w16"} {
		got, err := tensorio.ReadNPYArrayFile(filepath.Join(dir, name+".npy"))
		require.NoError(t, err, name)
		assert.Equal(t, want[i].DType, got.DType, name)
		assertArraysClose(t, want[i], got, 4*array.Float16.Epsilon())
	}

	// An archive: one member per output.
	npz := filepath.Join(tmp, "outs.npz")
	status, _, stderr = attnrun(append([]string{"run", model, "-o", npz}, inputs...)...)
	require.Equal(t, 0, status, stderr)
	names, arrays, err := tensorio.ReadNPZArrays(npz)
	require.NoError(t, err)
	assert.Equal(t, []string{"y", "p", "y32", "w16"}, names)
	assert.Equal(t, array.Float16, arrays[3].DType)

	// One path per output; .pb keeps the name and type.
	paths := []string{filepath.Join(tmp, "y.npy"), filepath.Join(tmp, "p.pb"), filepath.Join(tmp, "y32.npy"), filepath.Join(tmp, "w16.pb")}
	args := append([]string{"run", model}, inputs...)
	for _, p := range paths {
		args = append(args, "-o", p)
	}
	status, _, stderr = attnrun(args...)
	require.Equal(t, 0, status, stderr)
	tp, err := onnxio.ReadTensorFile(paths[3])
	require.NoError(t, err)
	assert.Equal(t, "w16", tp.GetName())
	assert.Equal(t, int32(array.Float16), tp.GetDataType())

	checkFailures(t, []failure{
		{"one .npy for four outputs", append([]string{"run", model, "-o", filepath.Join(tmp, "x.npy")}, inputs...), 2,
			"has 4 outputs (y, p, y32, w16): give 4 --output files, or one directory or .npz for all of them"},
		{"two paths for four outputs", append([]string{"run", model, "-o", "a.npy", "-o", "b.npy"}, inputs...), 2, "has 4 outputs"},
	})
}

func TestOutputKeys(t *testing.T) {
	keys, err := outputKeys([]string{"present.0.key", "onnx::Add_3", "/model/out"})
	require.NoError(t, err)
	assert.Equal(t, []string{"present.0.key", "onnx_Add_3", "_model_out"}, keys)
	_, err = outputKeys([]string{"a:b", "a/b"})
	assert.EqualError(t, err, `outputs "a:b" and "a/b" would both be written as a_b`)
	_, err = outputKeys([]string{".."})
	assert.ErrorContains(t, err, `output ".." cannot name a file`)
}

// An output of another element type fails whatever its values; a finite
// value against an infinite reference fails (check used to pass it, its
// tolerance being infinite too) and is reported as infinitely far.
func TestCompareOutput(t *testing.T) {
	_, err := compareOutput(array.FromSlice([]int{1}, []int32{1}), array.FromSlice([]int{1}, []int64{1}), 0, 0)
	assert.EqualError(t, err, "dtype int32, want int64")
	inf := float32(math.Inf(1))
	c, err := compareOutput(array.FromSlice([]int{2}, []float32{1, -inf}), array.FromSlice([]int{2}, []float32{inf, inf}), 1e-5, 1e-6)
	require.NoError(t, err)
	assert.Equal(t, 2, c.Mismatches)
	assert.Equal(t, math.Inf(1), c.MaxRel, "never NaN")
}

// copyDataSet copies a test-data set into a temporary directory.
func copyDataSet(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644))
	}
	return dst
}

// writeOutput replaces output_k.pb of a data set.
func writeOutput(t *testing.T, dir string, k int, name string, a *array.Array) {
	t.Helper()
	tp, err := onnxio.ArrayToTensor(name, a)
	require.NoError(t, err)
	require.NoError(t, onnxio.WriteTensorFile(filepath.Join(dir, "output_"+string(rune('0'+k))+".pb"), tp))
}

// assertArraysClose compares two float Arrays elementwise at rtol = atol = tol.
func assertArraysClose(t *testing.T, want, got *array.Array, tol float64) {
	t.Helper()
	c, err := compareOutput(got, want, tol, tol)
	require.NoError(t, err)
	assert.True(t, c.OK(), "max_abs %g at %d", c.MaxAbs, c.Worst)
}
