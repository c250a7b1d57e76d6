package onnxio

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// heapAllocated returns the bytes allocated on the heap so far by the whole
// program (a cumulative counter).
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// assertAllocatesLittle fails if f allocates more than 64 MiB: the calls
// it wraps must refuse before allocating what a file asks for.
func assertAllocatesLittle(t *testing.T, f func()) {
	t.Helper()
	before := heapAllocated()
	f()
	used := heapAllocated() - before
	assert.Less(t, used, uint64(64<<20), "allocated %d bytes", used)
}

// sparseExternalModel returns a model of n UINT8 initializers of size bytes
// each, stored one after the other in dir/big.bin, a sparse file: a model
// that asks for n*size bytes while taking no disk space.
func sparseExternalModel(t *testing.T, dir string, n int, size int64) []byte {
	t.Helper()
	require.NoError(t, os.Truncate(createFile(t, filepath.Join(dir, "big.bin")), int64(n)*size))
	m := smallModel(t)
	m.Graph.Initializer = nil
	for i := range n {
		m.Graph.Initializer = append(m.Graph.Initializer, &onnxpb.TensorProto{
			Name: proto.String(fmt.Sprintf("w%d", i)), DataType: proto.Int32(int32(Uint8)), Dims: []int64{size},
			DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
			ExternalData: []*onnxpb.StringStringEntryProto{
				{Key: proto.String("location"), Value: proto.String("big.bin")},
				{Key: proto.String("offset"), Value: proto.String(fmt.Sprint(int64(i) * size))},
				{Key: proto.String("length"), Value: proto.String(fmt.Sprint(size))},
			},
		})
	}
	return mustEncode(t, m)
}

func createFile(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return path
}

// TestExternalDataDefaultLimitIs4GiB: three 2 GiB tensors from one sparse
// 6 GiB file pass the per-tensor limit, but the README promises 4 GiB of
// external data per model, and the model is refused before any is read.
func TestExternalDataDefaultLimitIs4GiB(t *testing.T) {
	dir := t.TempDir()
	data := sparseExternalModel(t, dir, 3, 2<<30)
	assertAllocatesLittle(t, func() {
		_, err := DecodeModel(data, dir, DefaultLimits)
		require.ErrorIs(t, err, ErrLimit)
		assert.Contains(t, err.Error(), `initializer "w2" (UINT8 [2147483648]): external data file `+filepath.Join(dir, "big.bin"))
		assert.Contains(t, err.Error(), "brings the model's external data to 6442450944, over the limit of 4294967296 bytes per model")
	})
}

// TestExternalSizesOnly describes the same 6 GiB model without reading it:
// the entries are checked against the file, the data stays external.
func TestExternalSizesOnly(t *testing.T) {
	dir := t.TempDir()
	data := sparseExternalModel(t, dir, 3, 2<<30)
	lim := DefaultLimits
	lim.ExternalSizesOnly = true
	assertAllocatesLittle(t, func() {
		m, err := DecodeModel(data, dir, lim)
		require.NoError(t, err)
		for _, w := range m.Graph.Initializer {
			assert.True(t, isExternal(w))
			assert.Nil(t, w.RawData)
			assert.Equal(t, []int64{2 << 30}, w.Dims)
		}
		_, err = TensorToDense(m.Graph.Initializer[0])
		assert.ErrorContains(t, err, "still in an external file")
	})

	// The entries are still checked: a length past the file's end fails.
	require.NoError(t, os.Truncate(filepath.Join(dir, "big.bin"), 5<<30))
	_, err := DecodeModel(data, dir, lim)
	assert.ErrorContains(t, err, `initializer "w2" (UINT8 [2147483648]): external data file `+filepath.Join(dir, "big.bin")+": 2147483648 bytes at offset 4294967296 run past its end (5368709120 bytes)")
}

func TestExternalDataGoesThroughTheBudget(t *testing.T) {
	dir := t.TempDir()
	data := externalModel(t, dir, "weights.bin", nil) // 16 bytes
	_, err := DecodeModel(data, dir, Limits{MaxMemory: 15})
	require.ErrorIs(t, err, budget.ErrExceeded)
	assert.EqualError(t, err, `initializer "W" (FLOAT [2 2]): external data file `+filepath.Join(dir, "weights.bin")+" needs 16 B, over the memory budget of 15 B")
	_, err = DecodeModel(data, dir, Limits{MaxMemory: 16})
	require.NoError(t, err)

	// A shared budget: what others hold counts, and the call releases
	// what it reserved when it returns.
	b := budget.New(100)
	require.NoError(t, b.Reserve(90, "something else"))
	_, err = DecodeModel(data, dir, Limits{Budget: b})
	assert.ErrorContains(t, err, "needs 16 B, over the memory budget of 100 B (90 B already in use)")
	b.Release(90)
	_, err = DecodeModel(data, dir, Limits{Budget: b})
	require.NoError(t, err)
	assert.Zero(t, b.Used())
}

func TestReadModelReservesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.onnx")
	data := mustEncode(t, smallModel(t))
	require.NoError(t, os.WriteFile(path, data, 0o644))
	_, err := Limits{MaxMemory: int64(len(data)) - 1}.ReadModel(path)
	require.ErrorIs(t, err, budget.ErrExceeded)
	assert.EqualError(t, err, fmt.Sprintf("%s needs %d B, over the memory budget of %d B", path, len(data), len(data)-1))
	_, err = Limits{MaxMemory: int64(len(data))}.ReadModel(path)
	require.NoError(t, err)
}

func TestTensorToDenseGoesThroughTheBudget(t *testing.T) {
	tp := floatTensor(t, "x", []int{2, 4}, make([]float32, 8))
	_, err := Limits{MaxMemory: 31}.TensorToDense(tp)
	require.ErrorIs(t, err, budget.ErrExceeded)
	assert.EqualError(t, err, `tensor "x" (FLOAT [2 4]): converting it needs 32 B, over the memory budget of 31 B`)
	_, err = Limits{MaxMemory: 32}.TensorToDense(tp)
	require.NoError(t, err)
}

// TestDataSetGoesThroughTheBudget: the files of a set add up.
func TestDataSetGoesThroughTheBudget(t *testing.T) {
	dir := t.TempDir()
	x := floatTensor(t, "x", []int{1000}, make([]float32, 1000))
	require.NoError(t, WriteTensorFile(filepath.Join(dir, "input_0.pb"), x))
	require.NoError(t, WriteTensorFile(filepath.Join(dir, "output_0.pb"), x))
	size := int64(len(mustEncodeTensor(t, x)))
	_, err := Limits{MaxMemory: 2*size - 1}.ReadDataSet(dir)
	require.ErrorIs(t, err, budget.ErrExceeded)
	assert.EqualError(t, err, fmt.Sprintf("%s needs %s, over the memory budget of %s (%s already in use)",
		filepath.Join(dir, "output_0.pb"), budget.Format(size), budget.Format(2*size-1), budget.Format(size)))
	_, err = Limits{MaxMemory: 2 * size}.ReadDataSet(dir)
	require.NoError(t, err)
}

// TestDataSetIndicesSizeNothing: indices in file names are bounded by the
// files present. An empty input_2000000000.pb used to allocate 16 GB, and
// an index near 2^63 made ReadDataSet panic.
func TestDataSetIndicesSizeNothing(t *testing.T) {
	for _, c := range []struct {
		files []string
		want  string
	}{
		{[]string{"input_2000000000.pb"}, "input_0.pb is missing: test-data files are numbered from 0 without gaps; with 1 input file present, input_2000000000.pb is out of range"},
		{[]string{"input_9223372036854775806.pb"}, "input_0.pb is missing"},
		{[]string{"input_9223372036854775807.pb"}, "input_0.pb is missing"},
		{[]string{"output_99999999999999999999999.pb"}, "output_0.pb is missing: test-data files are numbered from 0 without gaps; with 1 output file present, output_99999999999999999999999.pb is out of range"},
		{[]string{"input_0.pb", "input_2000000000.pb"}, "input_1.pb is missing: test-data files are numbered from 0 without gaps; with 2 input files present, input_2000000000.pb is out of range"},
	} {
		t.Run(strings.Join(c.files, ","), func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range c.files {
				require.NoError(t, WriteTensorFile(filepath.Join(dir, name), floatTensor(t, "x", []int{1}, []float32{1})))
			}
			assertAllocatesLittle(t, func() {
				assert.NotPanics(t, func() {
					_, err := ReadDataSet(dir)
					assert.ErrorContains(t, err, filepath.Join(dir, c.want))
				})
			})
		})
	}
}
