// Package atomicfile writes files so that readers see either the old content
// or the complete new content, never a partial file: the data goes to a
// temporary file in the same directory, is flushed to disk, and is then
// renamed over the destination.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write creates or replaces the file at path with what fill writes, giving it
// permissions perm. If fill returns an error or panics, or any step of the
// write fails, the destination is left untouched and no temporary file
// remains (a panic in fill propagates after the clean-up). The temporary file
// is named ".<base>.tmp-<random>" so a crash mid-write leaves an obvious
// leftover rather than a truncated destination.
func Write(path string, perm os.FileMode, fill func(w io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	// The temporary file lives next to the destination: a rename is only
	// atomic within one file system.
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()

	if err := fill(tmp); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// Sync before rename: otherwise a crash can leave the new name pointing
	// at a file whose data never reached the disk.
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	committed = true
	syncDir(dir)
	return nil
}

// syncDir flushes the directory entry of a completed rename. It is best
// effort: some platforms and file systems cannot sync a directory, and the
// file itself is already complete.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	d.Close()
}
