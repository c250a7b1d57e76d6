package tensorio

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/regularfile"
)

// npyGoldens are the .npy files NumPy wrote (testdata/gen.py) and the
// tensors they hold.
var npyGoldens = []struct {
	file string
	want *tensor.Dense
	// numpyBytes: WriteNPY of want reproduces the file byte for byte.
	numpyBytes bool
}{
	{"f4_2x3.npy", pattern(tensor.Float32, 2, 3), true},
	{"f8_3.npy", pattern(tensor.Float64, 3), true},
	{"i8_2x2.npy", pattern(tensor.Int64, 2, 2), true},
	{"i4_4.npy", pattern(tensor.Int32, 4), true},
	{"u1_5.npy", pattern(tensor.Uint8, 5), true},
	{"i1_5.npy", pattern(tensor.Int8, 5), true},
	{"b1_2x2.npy", pattern(tensor.Bool, 2, 2), true},
	{"f4_scalar.npy", pattern(tensor.Float32), true},
	{"f4_1.npy", pattern(tensor.Float32, 1), true},
	{"f4_2x1x3x2.npy", pattern(tensor.Float32, 2, 1, 3, 2), true},
	{"f4_big_endian.npy", pattern(tensor.Float32, 2, 2), false},
	{"f8_big_endian.npy", pattern(tensor.Float64, 3), false},
	{"i8_big_endian.npy", pattern(tensor.Int64, 3), false},
	{"f4_2x3_v2.npy", pattern(tensor.Float32, 2, 3), false},
	{"f4_2x3_v3.npy", pattern(tensor.Float32, 2, 3), false},
}

func TestReadNPYGoldens(t *testing.T) {
	for _, g := range npyGoldens {
		t.Run(g.file, func(t *testing.T) {
			got, err := ReadNPYFile(filepath.Join("testdata", "npy", g.file))
			require.NoError(t, err)
			assertSameTensor(t, g.want, got)
		})
	}
}

func TestWriteNPYMatchesNumPyBytes(t *testing.T) {
	for _, g := range npyGoldens {
		if !g.numpyBytes {
			continue
		}
		t.Run(g.file, func(t *testing.T) {
			assert.Equal(t, readTestdata(t, "npy", g.file), npyBytes(t, g.want))
		})
	}
}

func TestNPYRoundTripEveryDtypeAndRank(t *testing.T) {
	for _, dt := range allDtypes {
		for _, shape := range shapesByRank {
			name := fmt.Sprintf("%v%v", dt, shape)
			t.Run(name, func(t *testing.T) {
				want := pattern(dt, shape...)
				path := filepath.Join(t.TempDir(), "x.npy")
				require.NoError(t, WriteNPYFile(path, want))
				got, err := ReadNPYFile(path)
				require.NoError(t, err)
				assertSameTensor(t, want, got)
			})
		}
	}
}

func TestWriteNPYCopiesViewsInLogicalOrder(t *testing.T) {
	base := pattern(tensor.Float32, 3, 4)

	sliced, err := base.Slice(nil, tensor.S(1, 3)) // columns 1 and 2
	require.NoError(t, err)
	got, err := ReadNPY(bytes.NewReader(npyBytes(t, sliced.(*tensor.Dense))))
	require.NoError(t, err)
	assert.Equal(t, []int{3, 2}, []int(got.Shape()))
	assert.Equal(t, []float32{-1.25, -1, -0.25, 0, 0.75, 1}, got.Data())

	transposed := base.Clone().(*tensor.Dense)
	require.NoError(t, transposed.T())
	got, err = ReadNPY(bytes.NewReader(npyBytes(t, transposed)))
	require.NoError(t, err)
	assert.Equal(t, []int{4, 3}, []int(got.Shape()))
	assert.Equal(t, []float32{-1.5, -0.5, 0.5, -1.25, -0.25, 0.75, -1, 0, 1, -0.75, 0.25, 1.25}, got.Data())
}

func TestReadNPYRefusesValidButUnsupportedFiles(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"bad_complex.npy", `dtype "<c8" not supported (want float32, float64, float16, int64, int32, int16, int8, uint64, uint32, uint16, uint8 or bool)`},
		{"bad_fortran.npy", "fortran_order True is not supported"},
		{"bad_structured.npy", "structured dtypes (a descr list) are not supported"},
		{"bad_object.npy", `dtype "|O" not supported`},
		{"bad_empty.npy", "shape (0, 3) has no elements, which *tensor.Dense cannot hold (ReadNPYArray reads it)"},
	} {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", "npy", c.file)
			_, err := ReadNPYFile(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.True(t, strings.HasPrefix(err.Error(), path+": "), "error %q names the file", err)
		})
	}
}

// npyWithHeader frames header text as a version 1.0 .npy file followed by
// data.
func npyWithHeader(header string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString(npyMagic)
	b.Write([]byte{1, 0})
	binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

func TestReadNPYRejectsMalformedInput(t *testing.T) {
	f4 := func(n int) []byte { return make([]byte, 4*n) }
	header := func(descr, fortran, shape string) string {
		return fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }\n", descr, fortran, shape)
	}
	good := header("<f4", "False", "(2, 3)")
	for _, c := range []struct {
		name  string
		input []byte
		want  string
	}{
		{"empty", nil, "shorter than the 8-byte preamble"},
		{"wrong magic", []byte("PK\x03\x04xxxxxxxx"), `not a .npy file: starts with "PK\x03\x04xx"`},
		{"version 4", append([]byte(npyMagic), 4, 0, 0, 0), "format version 4.0 not supported (want 1.0, 2.0 or 3.0)"},
		{"version 1.1", append([]byte(npyMagic), 1, 1, 0, 0), "format version 1.1 not supported"},
		{"no header length", append([]byte(npyMagic), 1, 0), "truncated header length"},
		{"header truncated", npyWithHeader(good, nil)[:20], "header truncated: want"},
		{"data truncated", npyWithHeader(good, f4(5)), "data truncated: want 24 bytes, got 20"},
		{"no data", npyWithHeader(good, nil), "data truncated: want 24 bytes, got 0"},
		{"not a dict", npyWithHeader("['descr']\n", nil), `header has "['descr']\n" where '{' was expected`},
		{"missing shape", npyWithHeader("{'descr': '<f4', 'fortran_order': False}\n", nil), `header has no "shape" key`},
		{"unknown key", npyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n", nil), `unexpected header key "x"`},
		{"duplicate key", npyWithHeader("{'descr': '<f4', 'descr': '<f4'}\n", nil), `header key "descr" appears twice`},
		{"shape is a list", npyWithHeader(header("<f4", "False", "[2, 3]"), f4(6)), `shape: header has "[2, 3], }`},
		{"shape (3) is not a tuple", npyWithHeader(header("<f4", "False", "(3)"), f4(3)), "a one-element shape needs a trailing comma"},
		{"negative dimension", npyWithHeader(header("<f4", "False", "(-2, 3)"), nil), "want a non-negative integer"},
		{"absurd dimension", npyWithHeader(header("<f4", "False", "(99999999999999999999,)"), nil), "dimension 99999999999999999999 is too large"},
		{"overflowing shape", npyWithHeader(header("<f4", "False", "(4294967296, 4294967296)"), nil), "more elements than fit in 64 bits"},
		{"over the byte limit", npyWithHeader(header("<f4", "False", "(1073741824, 2)"), nil), "needs more than the limit of 4294967296 bytes"},
		{"rank over the limit", npyWithHeader(header("<f4", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), f4(1)), "has rank 9, more than the limit 8"},
		{"fortran not a bool", npyWithHeader(header("<f4", "0", "(2,)"), f4(2)), "fortran_order: want True or False"},
		{"descr not a string", npyWithHeader("{'descr': 4, 'fortran_order': False, 'shape': (2,), }\n", f4(2)), "descr: want a quoted string"},
		{"unterminated string", npyWithHeader("{'descr: 4\n", nil), "unterminated string"},
		{"trailing garbage", npyWithHeader(good+"x", f4(6)), `unexpected "x" after the header dict`},
		{"non-ASCII header", npyWithHeader("{'descr': '<f\xe94'}\n", nil), "byte 0xe9 at offset 13 is not printable ASCII"},
		{"unsupported byte order", npyWithHeader(header("=f4", "False", "(2,)"), f4(2)), `dtype "=f4" not supported`},
		{"one-byte type with order", npyWithHeader(header("<u1", "False", "(2,)"), f4(1)), `dtype "<u1" not supported`},
		{"header over 64 KiB", append(append([]byte(npyMagic), 2, 0), 0, 0, 2, 0), "header of 131072 bytes is larger than the 65536 accepted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadNPY(bytes.NewReader(c.input))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestReadNPYLimitErrorsWrapErrLimit(t *testing.T) {
	data := npyBytes(t, pattern(tensor.Float32, 4, 4)) // 64 bytes of data
	_, err := Limits{MaxTotalBytes: 63}.ReadNPY(bytes.NewReader(data))
	require.ErrorIs(t, err, ErrLimit)
	assert.Contains(t, err.Error(), "shape (4, 4) needs more than the limit of 63 bytes")

	got, err := Limits{MaxTotalBytes: 64}.ReadNPY(bytes.NewReader(data))
	require.NoError(t, err)
	assert.Equal(t, []int{4, 4}, []int(got.Shape()))

	_, err = Limits{MaxDims: 1}.ReadNPY(bytes.NewReader(data))
	require.ErrorIs(t, err, ErrLimit)
}

// TestReadNPYEveryTruncation cuts a valid file at every length: each prefix
// must give an error, never a panic or a tensor.
func TestReadNPYEveryTruncation(t *testing.T) {
	data := npyBytes(t, pattern(tensor.Int64, 2, 3))
	for n := 0; n < len(data); n++ {
		_, err := ReadNPY(bytes.NewReader(data[:n]))
		require.Error(t, err, "prefix of %d bytes", n)
	}
}

func TestReadNPYFileRejectsTrailingBytes(t *testing.T) {
	path := writeTemp(t, "x.npy", append(npyBytes(t, pattern(tensor.Float32, 2)), 0))
	_, err := ReadNPYFile(path)
	require.Error(t, err)
	assert.Equal(t, path+": unexpected bytes after the array data", err.Error())

	// A stream reader reads only what it needs.
	got, err := ReadNPY(bytes.NewReader(append(npyBytes(t, pattern(tensor.Float32, 2)), 0)))
	require.NoError(t, err)
	assertSameTensor(t, pattern(tensor.Float32, 2), got)
}

func TestReadNPYFileMissing(t *testing.T) {
	_, err := ReadNPYFile(filepath.Join(t.TempDir(), "nope.npy"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestWriteNPYRefusesUnsupportedTensors(t *testing.T) {
	var buf bytes.Buffer
	err := WriteNPY(&buf, tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{1, 2})))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dtype int not supported (want float32")
	require.Error(t, WriteNPY(&buf, nil))
	err = WriteNPY(&buf, &tensor.Dense{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dtype none not supported")
}

func TestWriteNPYFileFailureKeepsOldFile(t *testing.T) {
	path := writeTemp(t, "x.npy", []byte("old"))
	err := WriteNPYFile(path, tensor.New(tensor.WithShape(1), tensor.WithBacking([]int{1})))
	require.Error(t, err)
	got, readErr := os.ReadFile(path)
	require.NoError(t, readErr)
	assert.Equal(t, "old", string(got))
	entries, _ := os.ReadDir(filepath.Dir(path))
	assert.Len(t, entries, 1, "no temporary file left")
}

func TestWriteNPYHeaderVersion2ForHugeRank(t *testing.T) {
	// Only an absurd header needs version 2.0; build the preamble directly.
	p := npyPreamble(strings.Repeat("x", 70000))
	assert.Equal(t, byte(2), p[6])
	assert.Zero(t, len(p)%64)
	assert.Equal(t, uint32(len(p)-12), binary.LittleEndian.Uint32(p[8:12]))
}

func TestNPYPreambleAlignsTo64(t *testing.T) {
	for _, shape := range shapesByRank {
		b := npyBytes(t, pattern(tensor.Float32, shape...))
		hlen := int(binary.LittleEndian.Uint16(b[8:10]))
		assert.Zero(t, (10+hlen)%64, "shape %v", shape)
		assert.Equal(t, byte('\n'), b[10+hlen-1])
	}
}

func TestErrorsAreNotLimitErrorsWhenMalformed(t *testing.T) {
	_, err := ReadNPY(bytes.NewReader([]byte("garbage!")))
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrLimit))
}

// TestShortFileCannotForceAllocation: a 128-byte file whose header declares
// 400 MB (within the default limit) is refused before the tensor is
// allocated, whether read from a file, from memory or from an archive.
func TestShortFileCannotForceAllocation(t *testing.T) {
	liar := npyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (100000000,), }\n", make([]byte, 40))
	want := "data truncated: want 400000000 bytes, got 40"
	for name, read := range map[string]func() error{
		"file": func() error {
			_, err := ReadNPYFile(writeTemp(t, "x.npy", liar))
			return err
		},
		"memory": func() error {
			_, err := ReadNPY(bytes.NewReader(liar))
			return err
		},
		"npz": func() error {
			archive := buildZip(t, zipMember{name: "a.npy", data: liar, method: zip.Deflate})
			_, _, err := ReadNPZFrom(bytes.NewReader(archive), int64(len(archive)))
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			before := heapAllocated()
			err := read()
			used := heapAllocated() - before
			require.Error(t, err)
			assert.Contains(t, err.Error(), want)
			assert.Less(t, used, uint64(8<<20), "allocated %d bytes", used)
		})
	}
}

// TestReadNPYFileRefusesPipes: only regular files are opened by path (a
// FIFO would block the open until a writer comes); a stream is read with
// ReadNPY.
func TestReadNPYFileRefusesPipes(t *testing.T) {
	data := npyBytes(t, pattern(tensor.Float32, 2, 3))
	r, w, err := os.Pipe()
	require.NoError(t, err)
	go func() {
		w.Write(data)
		w.Close()
	}()
	defer r.Close()
	path := fmt.Sprintf("/dev/fd/%d", r.Fd())
	_, err = ReadNPYFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no /dev/fd on this system")
	}
	assert.ErrorIs(t, err, regularfile.ErrNotRegular)
	assert.EqualError(t, err, path+": is a named pipe (FIFO), not a regular file")

	got, err := ReadNPY(r)
	require.NoError(t, err)
	assertSameTensor(t, pattern(tensor.Float32, 2, 3), got)
}
