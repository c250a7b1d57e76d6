package tensorio

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"runtime/metrics"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// fuzzLimits keeps each fuzz input's allowed allocation small, so that a
// reader that allocates from a size it did not check shows up at once.
var fuzzLimits = Limits{MaxTotalBytes: 1 << 20, MaxDims: 8}

// heapAllocated returns the bytes allocated on the heap so far by the whole
// program (a cumulative counter, read without stopping the world).
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// checkAllocation fails if a single read allocated more than the limits
// allow plus bookkeeping proportional to the input.
func checkAllocation(t *testing.T, before uint64, input []byte) {
	t.Helper()
	used := heapAllocated() - before
	bound := uint64(4*fuzzLimits.MaxTotalBytes) + 8*uint64(len(input)) + 1<<20
	if used > bound {
		t.Fatalf("reading %d input bytes allocated %d bytes, more than the bound %d", len(input), used, bound)
	}
}

// addFiles adds every file under testdata/dir to the seed corpus, each whole,
// truncated, and with a byte flipped in its header.
func addFiles(f *testing.F, dir string, keep func(string) bool) {
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*"))
	require.NoError(f, err)
	for _, p := range paths {
		if !keep(p) {
			continue
		}
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		addVariants(f, b)
	}
}

func addVariants(f *testing.F, b []byte) {
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add(b[:len(b)-1])
	for _, at := range []int{6, 8, 9, 20, len(b) / 3} {
		if at < len(b) {
			c := bytes.Clone(b)
			c[at] ^= 0x5a
			f.Add(c)
		}
	}
}

// roundTrips checks that a tensor a reader accepted writes and reads back
// to the same bytes.
func roundTrips(t *testing.T, x *tensor.Dense) {
	t.Helper()
	var first bytes.Buffer
	require.NoError(t, WriteNPY(&first, x))
	again, err := ReadNPY(bytes.NewReader(first.Bytes()))
	require.NoError(t, err)
	var second bytes.Buffer
	require.NoError(t, WriteNPY(&second, again))
	require.Equal(t, first.Bytes(), second.Bytes())
}

func FuzzReadNPY(f *testing.F) {
	addFiles(f, "npy", func(string) bool { return true })
	header := func(shape string) []byte {
		return npyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': "+shape+", }\n", make([]byte, 16))
	}
	f.Add(header("(4,)"))
	f.Add(header("(999999999, 999999999)"))
	f.Add(header("(9223372036854775807,)"))
	f.Add(header("()"))
	f.Fuzz(func(t *testing.T, data []byte) {
		before := heapAllocated()
		x, err := fuzzLimits.ReadNPY(bytes.NewReader(data))
		checkAllocation(t, before, data)
		if err != nil {
			return
		}
		roundTrips(t, x)
	})
}

func FuzzReadNPZ(f *testing.F) {
	addFiles(f, "npz", func(string) bool { return true })
	addFiles(f, "safetensors", func(p string) bool { return filepath.Ext(p) == ".npz" })
	// A member that inflates far beyond its array, and one that lies about
	// its size.
	var bomb bytes.Buffer
	zw := zip.NewWriter(&bomb)
	w, _ := zw.CreateHeader(&zip.FileHeader{Name: "a.npy", Method: zip.Deflate})
	var member bytes.Buffer
	_ = WriteNPY(&member, pattern(tensor.Float32, 2))
	w.Write(member.Bytes())
	w.Write(make([]byte, 4<<20))
	zw.Close()
	f.Add(bomb.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		before := heapAllocated()
		_, tensors, err := fuzzLimits.ReadNPZFrom(bytes.NewReader(data), int64(len(data)))
		checkAllocation(t, before, data)
		if err != nil {
			return
		}
		for _, x := range tensors {
			roundTrips(t, x)
		}
	})
}

func FuzzReadSafetensors(f *testing.F) {
	addFiles(f, "safetensors", func(p string) bool { return filepath.Ext(p) == ".safetensors" })
	entry := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}}`
	f.Add(stFile(entry, make([]byte, 8)))
	f.Add(stFile(`{"a":{"dtype":"BF16","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(stFile(`{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}}`, make([]byte, 6)))
	f.Add(stFile("{}", nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		before := heapAllocated()
		names, tensors, _, err := fuzzLimits.ReadSafetensorsFrom(bytes.NewReader(data), int64(len(data)))
		checkAllocation(t, before, data)
		if err != nil {
			return
		}
		require.Len(t, tensors, len(names))
		for _, x := range tensors {
			roundTrips(t, x)
		}
	})
}
