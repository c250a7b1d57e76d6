package tensorio

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// npzGolden is what testdata/npz/*.npz hold, in archive order.
var npzGolden = struct {
	names   []string
	tensors []*tensor.Dense
}{
	[]string{"W_query.weight", "steps", "mask", "scale", "heads.0.bias"},
	[]*tensor.Dense{
		pattern(tensor.Float32, 2, 3),
		pattern(tensor.Int64, 4),
		pattern(tensor.Bool, 2, 2),
		pattern(tensor.Float64),
		pattern(tensor.Float32, 3),
	},
}

func TestReadNPZGoldens(t *testing.T) {
	for _, file := range []string{"stored.npz", "deflated.npz"} {
		t.Run(file, func(t *testing.T) {
			names, tensors, err := ReadNPZ(filepath.Join("testdata", "npz", file))
			require.NoError(t, err)
			assert.Equal(t, npzGolden.names, names)
			require.Len(t, tensors, len(npzGolden.tensors))
			for i := range tensors {
				assertSameTensor(t, npzGolden.tensors[i], tensors[i], names[i])
			}
		})
	}
}

func TestNPZRoundTripEveryDtypeAndRank(t *testing.T) {
	var names []string
	var want []*tensor.Dense
	for _, dt := range allDtypes {
		for _, shape := range shapesByRank {
			names = append(names, fmt.Sprintf("%v.rank%d", dt, len(shape)))
			want = append(want, pattern(dt, shape...))
		}
	}
	path := filepath.Join(t.TempDir(), "all.npz")
	require.NoError(t, WriteNPZ(path, names, want))

	gotNames, got, err := ReadNPZ(path)
	require.NoError(t, err)
	assert.Equal(t, names, gotNames)
	for i := range want {
		assertSameTensor(t, want[i], got[i], names[i])
	}
}

func TestWriteNPZIsByteStable(t *testing.T) {
	var a, b bytes.Buffer
	require.NoError(t, WriteNPZTo(&a, npzGolden.names, npzGolden.tensors))
	require.NoError(t, WriteNPZTo(&b, npzGolden.names, npzGolden.tensors))
	assert.Equal(t, a.Bytes(), b.Bytes())

	// Members are plain .npy files in the given order, stored, with the
	// fixed timestamp.
	zr, err := zip.NewReader(bytes.NewReader(a.Bytes()), int64(a.Len()))
	require.NoError(t, err)
	for i, f := range zr.File {
		assert.Equal(t, npzGolden.names[i]+".npy", f.Name)
		assert.Equal(t, zip.Store, f.Method)
		assert.True(t, f.Modified.Equal(npzTime), "timestamp %v", f.Modified)
		rc, err := f.Open()
		require.NoError(t, err)
		member, err := io.ReadAll(rc)
		require.NoError(t, err)
		assert.Equal(t, npyBytes(t, npzGolden.tensors[i]), member)
	}
}

func TestReadNPZFromMemory(t *testing.T) {
	raw := readTestdata(t, "npz", "deflated.npz")
	names, _, err := ReadNPZFrom(bytes.NewReader(raw), int64(len(raw)))
	require.NoError(t, err)
	assert.Equal(t, npzGolden.names, names)
}

func TestWriteNPZRejectsBadArguments(t *testing.T) {
	x := pattern(tensor.Float32, 2)
	for _, c := range []struct {
		name    string
		names   []string
		tensors []*tensor.Dense
		want    string
	}{
		{"count mismatch", []string{"a", "b"}, []*tensor.Dense{x}, "2 names for 1 tensors"},
		{"empty name", []string{""}, []*tensor.Dense{x}, "tensor 0 has an empty name"},
		{"duplicate", []string{"a", "a"}, []*tensor.Dense{x, x}, `name "a" appears twice`},
		{"nil tensor", []string{"a"}, []*tensor.Dense{nil}, `tensor "a" is nil`},
		{"unsupported dtype", []string{"a"}, []*tensor.Dense{tensor.New(tensor.WithShape(1), tensor.WithBacking([]complex64{1}))}, `tensor "a": dtype complex64 not supported`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.npz")
			err := WriteNPZ(path, c.names, c.tensors)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			_, statErr := os.Stat(path)
			assert.ErrorIs(t, statErr, os.ErrNotExist, "nothing written")
		})
	}
}

// zipMember is one member of a hand-built archive.
type zipMember struct {
	name   string
	data   []byte
	method uint16
	// declared, if set, replaces the uncompressed size in the headers.
	declared uint64
}

// buildZip writes members with the given methods; a declared size is
// written raw so that it can lie about the content.
func buildZip(t *testing.T, members ...zipMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.RegisterCompressor(99, func(w io.Writer) (io.WriteCloser, error) { return nopWriteCloser{w}, nil })
	for _, m := range members {
		if m.declared != 0 {
			w, err := zw.CreateRaw(&zip.FileHeader{
				Name: m.name, Method: zip.Store, CompressedSize64: uint64(len(m.data)),
				UncompressedSize64: m.declared,
			})
			require.NoError(t, err)
			_, err = w.Write(m.data)
			require.NoError(t, err)
			continue
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: m.method})
		require.NoError(t, err)
		_, err = w.Write(m.data)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func TestReadNPZRejectsMalformedArchives(t *testing.T) {
	good := npyBytes(t, pattern(tensor.Float32, 2, 3))
	hugeHeader := npyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000), }\n", nil)
	for _, c := range []struct {
		name  string
		input []byte
		lim   Limits
		want  string
	}{
		{"not a zip", []byte("definitely not a zip file"), Limits{}, "not a valid .npz (zip) archive"},
		{"no members", buildZip(t), Limits{}, "archive holds no arrays"},
		{"member not .npy", buildZip(t, zipMember{name: "notes.txt", data: []byte("hi")}), Limits{}, `member "notes.txt" is not a .npy file`},
		{"member named .npy", buildZip(t, zipMember{name: ".npy", data: good}), Limits{}, `member ".npy" is not a .npy file`},
		{"duplicate member", buildZip(t, zipMember{name: "a.npy", data: good}, zipMember{name: "a.npy", data: good}), Limits{}, `member "a.npy" appears twice`},
		{"bad member", buildZip(t, zipMember{name: "a.npy", data: []byte("nonsense")}), Limits{}, `member "a.npy": not a .npy file`},
		{"truncated member", buildZip(t, zipMember{name: "a.npy", data: good[:len(good)-3]}), Limits{}, `member "a.npy": data truncated: want 24 bytes, got 21`},
		{"trailing bytes in member", buildZip(t, zipMember{name: "a.npy", data: append(good, 1, 2)}), Limits{}, `member "a.npy": unexpected bytes after the array data`},
		{"unknown method", buildZip(t, zipMember{name: "a.npy", data: good, method: 99}), Limits{}, "compression method 99 not supported (want stored or deflated)"},
		{"declared size over limit", buildZip(t, zipMember{name: "a.npy", data: good, declared: 1 << 40}), Limits{}, "declares 1099511627776 bytes, more than the limit of 4294967296"},
		{"declared size lies", buildZip(t, zipMember{name: "a.npy", data: good, declared: uint64(len(good)) + 10}), Limits{}, `member "a.npy"`},
		{"header over limit", buildZip(t, zipMember{name: "a.npy", data: hugeHeader, method: zip.Deflate}), Limits{MaxTotalBytes: 1 << 20}, "needs more than the limit of 1048576 bytes"},
		{"total over limit", buildZip(t, zipMember{name: "a.npy", data: good}, zipMember{name: "b.npy", data: good}), Limits{MaxTotalBytes: 40}, `member "b.npy": shape (2, 3) needs more than the limit of 16 bytes`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeTemp(t, "x.npz", c.input)
			_, _, err := c.lim.ReadNPZ(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Contains(t, err.Error(), path+": ")
		})
	}
}

// TestReadNPZDeflateBombStopsAtTheDeclaredArray builds a member that
// decompresses to far more than its .npy header declares: the reader must
// stop after the array instead of inflating the rest.
func TestReadNPZDeflateBombStopsAtTheDeclaredArray(t *testing.T) {
	member := append(npyBytes(t, pattern(tensor.Float32, 2)), make([]byte, 64<<20)...)
	archive := buildZip(t, zipMember{name: "a.npy", data: member, method: zip.Deflate})
	require.Less(t, len(archive), 1<<20, "the bomb is small on disk")

	_, _, err := ReadNPZFrom(bytes.NewReader(archive), int64(len(archive)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unexpected bytes after the array data")
}
