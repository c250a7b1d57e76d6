package regularfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadFileReadsRegularFilesAndSymlinks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	require.NoError(t, os.WriteFile(path, []byte("hello"), 0o644))
	link := filepath.Join(dir, "link.bin")
	require.NoError(t, os.Symlink("a.bin", link))

	for _, p := range []string{path, link} {
		data, err := ReadFile(p, 0)
		require.NoError(t, err)
		assert.Equal(t, "hello", string(data))
		data, err = ReadFile(p, 5)
		require.NoError(t, err)
		assert.Equal(t, "hello", string(data))
	}
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	data, err := ReadFile(empty, 10)
	require.NoError(t, err)
	assert.Empty(t, data)
}

func TestReadFileCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.bin")
	require.NoError(t, os.WriteFile(path, []byte("hello!"), 0o644))
	_, err := ReadFile(path, 5)
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.EqualError(t, err, path+": file is 6 bytes, over the limit of 5")
}

func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadFile(dir, 0)
	assert.ErrorIs(t, err, ErrNotRegular)
	assert.EqualError(t, err, dir+": is a directory, not a regular file")

	_, err = Open(filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = Open("")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = OpenInRoot(nil, "x")
	assert.Error(t, err)
	_, err = ReadAll(nil, "x", 0)
	assert.Error(t, err)
}

func TestOpenInRootStaysInside(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "model")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(parent, "secret"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "w.bin"), []byte("w"), 0o644))
	require.NoError(t, os.Symlink("../secret", filepath.Join(dir, "escape")))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()

	f, err := OpenInRoot(root, "w.bin")
	require.NoError(t, err)
	data, err := ReadAll(f, "w.bin", 0)
	require.NoError(t, err)
	assert.Equal(t, "w", string(data))
	f.Close()

	for _, name := range []string{"../secret", "escape", "."} {
		_, err := OpenInRoot(root, name)
		assert.Error(t, err, name)
	}
}
