//go:build unix

package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withUmask runs f with the process's umask set to mask. The umask is
// process-wide, so these tests do not run in parallel.
func withUmask(mask int, f func()) {
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	f()
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	return info.Mode().Perm()
}

func TestNewFileHonoursUmask(t *testing.T) {
	for _, c := range []struct {
		umask int
		want  os.FileMode
	}{{0o022, 0o644}, {0o077, 0o600}, {0o002, 0o664}} {
		path := filepath.Join(t.TempDir(), "out.bin")
		withUmask(c.umask, func() { require.NoError(t, Write(path, 0o666, writeString("x"))) })
		assert.Equal(t, c.want, mode(t, path), "umask %#o", c.umask)
	}
}

func TestExistingFileKeepsItsMode(t *testing.T) {
	for _, existing := range []os.FileMode{0o600, 0o640, 0o664, 0o755} {
		path := filepath.Join(t.TempDir(), "out.bin")
		require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
		require.NoError(t, os.Chmod(path, existing))
		withUmask(0o022, func() { require.NoError(t, Write(path, 0o644, writeString("new"))) })
		assert.Equal(t, existing, mode(t, path))
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, "new", string(got))
	}
}
