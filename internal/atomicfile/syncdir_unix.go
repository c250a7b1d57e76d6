//go:build unix

package atomicfile

import (
	"errors"
	"os"
	"syscall"
)

// syncDir flushes a directory's entries, so that a completed rename
// survives a crash. File systems that cannot sync a directory say EINVAL;
// the file itself is complete there.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}
