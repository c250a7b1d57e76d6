// Package atomicfile writes files so that readers see either the old content
// or the complete new content, never a partial file: the data goes to a
// temporary file in the same directory, is flushed to disk, and is then
// renamed over the destination, and the directory is flushed too.
//
// Temporary files never outlive a write: a failed write removes its own, and
// a program that calls CleanUpOnSignals has them removed when SIGINT or
// SIGTERM ends it mid-write.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// Write creates or replaces the file at path with what fill writes. A new
// file gets permissions perm as filtered by the process's umask (as
// os.WriteFile does); a file that exists keeps its permission bits, so a
// private 0600 file stays private.
//
// If fill returns an error or panics, or any step of the write fails, the
// destination is left untouched and no temporary file remains (a panic in
// fill propagates after the clean-up). The temporary file is named
// ".<base>.tmp-<random>"; errors name path, never the temporary file.
func Write(path string, perm os.FileMode, fill func(w io.Writer) error) error {
	if err := write(path, perm, fill); err != nil {
		return fmt.Errorf("write %s: %w", path, withoutTempName(err))
	}
	return nil
}

// WriteFile writes data to path with Write.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

func write(path string, perm os.FileMode, fill func(w io.Writer) error) error {
	if fill == nil {
		return errors.New("nothing to write (nil fill function)")
	}
	dir, base := filepath.Split(path)
	if base == "" || base == "." || base == ".." {
		return errors.New("not a file name")
	}
	if dir == "" {
		dir = "."
	}
	mode, existing := perm.Perm(), false
	if info, err := os.Stat(path); err == nil {
		if info.IsDir() {
			return errors.New("is a directory")
		}
		if !info.Mode().IsRegular() {
			return errors.New("exists and is not a regular file")
		}
		mode, existing = info.Mode().Perm(), true
	}

	// The temporary file lives next to the destination: a rename is only
	// atomic within one file system.
	tmp, err := createTemp(dir, base, mode)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
		forget(tmp.Name())
	}()

	// Creating the file applied the umask; an existing file's mode is kept
	// exactly, set before any data is written.
	if existing {
		if err := tmp.Chmod(mode); err != nil {
			return err
		}
	}
	if err := fill(writer{tmp}); err != nil {
		return err
	}
	// Sync before rename: otherwise a crash can leave the new name pointing
	// at a file whose data never reached the disk.
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	committed = true
	// Sync after rename: otherwise a crash can lose the new name itself.
	return syncDir(dir)
}

// maxTempBase keeps temporary names within the 255 bytes most file systems
// allow, however long the destination's name.
const maxTempBase = 200

// createTemp creates a new temporary file for base in dir with mode (the
// umask applies), recording it for CleanUpOnSignals before it exists.
func createTemp(dir, base string, mode os.FileMode) (*os.File, error) {
	if len(base) > maxTempBase {
		base = base[:maxTempBase]
	}
	for range 100 {
		name := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(uint64(rand.Uint32()), 10))
		remember(name)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, mode)
		if err == nil {
			return f, nil
		}
		forget(name)
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	return nil, errors.New("cannot find an unused temporary file name")
}

// writer hands fill the temporary file as a plain io.Writer whose errors
// do not name the file (the caller's error names the destination).
type writer struct{ f *os.File }

func (w writer) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	return n, withoutTempName(err)
}

// withoutTempName strips the temporary file's name from the file system's
// errors, keeping what went wrong (errors.Is still matches fs.ErrPermission
// and the like).
func withoutTempName(err error) error {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return fmt.Errorf("%s: %w", pathErr.Op, pathErr.Err)
	}
	var linkErr *os.LinkError
	if errors.As(err, &linkErr) {
		return fmt.Errorf("%s: %w", linkErr.Op, linkErr.Err)
	}
	return err
}
