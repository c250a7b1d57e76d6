//go:build unix

package regularfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// within fails the test if f does not return in time: opening a FIFO for
// reading blocks until a writer appears, which here is never.
func within(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("blocked on a FIFO")
	}
}

// mkfifo makes a named pipe at dir/name and returns its path.
func mkfifo(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, syscall.Mkfifo(path, 0o644))
	return path
}

func TestFIFOIsRefusedWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo := mkfifo(t, dir, "pipe")
	within(t, func() {
		_, err := ReadFile(fifo, 0)
		assert.ErrorIs(t, err, ErrNotRegular)
		assert.EqualError(t, err, fifo+": is a named pipe (FIFO), not a regular file")
	})
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	within(t, func() {
		_, err := OpenInRoot(root, "pipe")
		assert.ErrorIs(t, err, ErrNotRegular)
	})
	within(t, func() {
		_, err := ReadFile("/dev/zero", 0)
		assert.ErrorIs(t, err, ErrNotRegular)
		assert.ErrorContains(t, err, "is a character device")
	})
}

// TestFIFOSwappedInAfterTheCheck opens the FIFO itself, as a path replaced
// between Stat and open would be: the open must not block and the check on
// the descriptor must refuse it.
func TestFIFOSwappedInAfterTheCheck(t *testing.T) {
	fifo := mkfifo(t, t.TempDir(), "pipe")
	regular, err := os.Stat(os.Args[0]) // any regular file
	require.NoError(t, err)
	within(t, func() {
		_, err := open(fifo, func(string) (os.FileInfo, error) { return regular, nil }, func() (*os.File, error) {
			return os.OpenFile(fifo, os.O_RDONLY|nonblock, 0)
		})
		assert.ErrorIs(t, err, ErrNotRegular)
	})
}
