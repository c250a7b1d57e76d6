package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

// dirEntries lists the names in dir, to show that nothing was left behind.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteCreatesFileWithContentAndMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")

	require.NoError(t, Write(path, 0o640, writeString("hello")))

	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), info.Mode().Perm())
	assert.Equal(t, []string{"out.bin"}, dirEntries(t, dir))
}

func TestWriteReplacesExistingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	require.NoError(t, os.WriteFile(path, []byte("old content that is longer"), 0o644))

	require.NoError(t, Write(path, 0o644, writeString("new")))

	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
	assert.Equal(t, []string{"out.bin"}, dirEntries(t, dir))
}

func TestWriteFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	boom := errors.New("boom")

	err := Write(path, 0o644, func(w io.Writer) error {
		if _, err := io.WriteString(w, "partial"); err != nil {
			return err
		}
		return boom
	})

	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), path)
	assert.Empty(t, dirEntries(t, dir))
}

func TestWriteFailureKeepsExistingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	require.NoError(t, os.WriteFile(path, []byte("precious"), 0o644))

	err := Write(path, 0o644, func(w io.Writer) error {
		_, _ = io.WriteString(w, "half-written")
		return errors.New("disk full")
	})

	require.Error(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(got))
	assert.Equal(t, []string{"out.bin"}, dirEntries(t, dir))
}

func TestWritePanicLeavesNothingAndPropagates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	require.NoError(t, os.WriteFile(path, []byte("precious"), 0o644))

	assert.PanicsWithValue(t, "fill exploded", func() {
		_ = Write(path, 0o644, func(w io.Writer) error {
			_, _ = io.WriteString(w, "half")
			panic("fill exploded")
		})
	})

	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(got))
	assert.Equal(t, []string{"out.bin"}, dirEntries(t, dir))
}

func TestWriteIntoMissingDirectoryFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "out.bin")

	err := Write(path, 0o644, writeString("x"))

	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
}

func TestWriteRelativePath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)

	require.NoError(t, Write("rel.txt", 0o600, writeString("ok")))

	got, err := os.ReadFile(filepath.Join(dir, "rel.txt"))
	require.NoError(t, err)
	assert.Equal(t, "ok", string(got))
}

func TestErrorsNameTheDestinationNotTheTemporaryFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "m.onnx")
	err := Write(path, 0o644, writeString("x"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Equal(t, "write "+path+": open: no such file or directory", err.Error())
	assert.NotContains(t, err.Error(), ".tmp-")
}

func TestWriteRefusesBadArguments(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		path string
		fill func(io.Writer) error
		want string
	}{
		{"nil fill", filepath.Join(dir, "x"), nil, "nil fill function"},
		{"empty path", "", writeString("x"), "not a file name"},
		{"directory path", dir + string(filepath.Separator), writeString("x"), "not a file name"},
		{"dot dot", dir + string(filepath.Separator) + "..", writeString("x"), "not a file name"},
		{"existing directory", dir, writeString("x"), "is a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Write(c.path, 0o644, c.fill)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	assert.Empty(t, dirEntries(t, dir))
}

func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.txt")
	require.NoError(t, WriteFile(path, []byte("data"), 0o644))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "data", string(got))
	require.NoError(t, WriteFile(path, nil, 0o644))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestLongNameGetsATemporaryFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, strings.Repeat("n", 250))
	require.NoError(t, WriteFile(path, []byte("x"), 0o644))
	assert.Equal(t, []string{filepath.Base(path)}, dirEntries(t, dir))
}
