//go:build unix

package tensorio

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/internal/regularfile"
)

// TestFIFOsAreRefused: opening a FIFO for reading blocks until a writer
// comes, which here is never; every reader refuses it at once.
func TestFIFOsAreRefused(t *testing.T) {
	dir := t.TempDir()
	for name, read := range map[string]func(string) error{
		"x.npy":         func(p string) error { _, err := ReadNPYFile(p); return err },
		"x.npz":         func(p string) error { _, _, err := ReadNPZ(p); return err },
		"x.safetensors": func(p string) error { _, _, _, err := ReadSafetensors(p); return err },
	} {
		path := filepath.Join(dir, name)
		require.NoError(t, syscall.Mkfifo(path, 0o644))
		done := make(chan error, 1)
		go func() { done <- read(path) }()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, regularfile.ErrNotRegular, name)
			assert.EqualError(t, err, path+": is a named pipe (FIFO), not a regular file")
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: blocked on a FIFO", name)
		}
	}
}
