// Package regularfile opens files named by users and by other files for
// reading, refusing everything that is not a regular file.
//
// A path from a stranger can name a FIFO, a device or a directory. Opening a
// FIFO for reading blocks until a writer appears (forever, in practice), a
// character device can stream without end, and a directory reads as an
// error deep inside a decoder. So every reader in attnrun opens its files
// here: the path is checked with Stat, opened with O_NONBLOCK so that a FIFO
// swapped in after the check cannot block the open, and checked again with
// Stat on the open descriptor, which is the check that counts.
package regularfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is matched (errors.Is) by the error for a path that exists
// but is not a regular file (or a symbolic link to one).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is matched by the error ReadFile returns for a file larger
// than its cap.
var ErrTooLarge = errors.New("file too large")

// Open opens the regular file at path for reading. Symbolic links are
// followed. Anything else (a directory, FIFO, socket or device) is refused
// without blocking, with an error that starts with the path and says what
// the path is. Errors from the file system are *fs.PathError as os.Open
// returns them, so errors.Is(err, fs.ErrNotExist) works.
func Open(path string) (*os.File, error) {
	return open(path, os.Stat, func() (*os.File, error) {
		return os.OpenFile(path, os.O_RDONLY|nonblock, 0)
	})
}

// OpenInRoot opens the regular file name inside root for reading, with the
// checks of Open; root keeps name from leaving its directory (through "..",
// an absolute path or a symbolic link). Errors start with
// root.Name()/name.
func OpenInRoot(root *os.Root, name string) (*os.File, error) {
	if root == nil {
		return nil, fmt.Errorf("%s: no directory to open it in (nil *os.Root)", name)
	}
	return open(root.Name()+string(os.PathSeparator)+name, func(string) (fs.FileInfo, error) {
		return root.Stat(name)
	}, func() (*os.File, error) {
		return root.OpenFile(name, os.O_RDONLY|nonblock, 0)
	})
}

// open checks the path with stat, opens it, and checks the open file.
func open(path string, stat func(string) (fs.FileInfo, error), openFile func() (*os.File, error)) (*os.File, error) {
	if path == "" {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	// The first check refuses a FIFO or device before opening it at all:
	// opening some devices has side effects.
	info, err := stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, notRegular(path, info.Mode())
	}
	f, err := openFile()
	if err != nil {
		return nil, err
	}
	// The second check is on what was actually opened: the path may have
	// been replaced between the two.
	if info, err = f.Stat(); err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(path, info.Mode())
	}
	return f, nil
}

// ReadFile reads the whole regular file at path, refusing it before reading
// when it is larger than max bytes (max <= 0: no cap). A file that grows
// past max while being read is refused too. The error for an oversized file
// matches ErrTooLarge and reads "PATH: file is N bytes, over the limit of
// MAX".
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, path, max)
}

// ReadAll reads f, a file opened by Open or OpenInRoot, to its end under
// the cap of ReadFile; path names it in errors.
func ReadAll(f *os.File, path string, max int64) ([]byte, error) {
	if f == nil {
		return nil, fmt.Errorf("%s: no file (nil *os.File)", path)
	}
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if max > 0 && info.Size() > max {
		return nil, tooLarge(path, info.Size(), max)
	}
	// The cap also holds for a file that grows while it is read.
	r := io.Reader(f)
	if max > 0 && max+1 > max { // max+1 wraps for math.MaxInt64, which caps nothing
		r = io.LimitReader(f, max+1)
	}
	// Room for the whole file and the read that sees its end, so that
	// the buffer is allocated once.
	buf := bytes.NewBuffer(make([]byte, 0, info.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if max > 0 && int64(buf.Len()) > max {
		return nil, tooLarge(path, -1, max) // it grew while being read
	}
	return buf.Bytes(), nil
}

// notRegularError is the error for a path that is not a regular file.
type notRegularError struct {
	path string
	mode fs.FileMode
}

func notRegular(path string, mode fs.FileMode) error { return &notRegularError{path, mode} }

func (e *notRegularError) Error() string {
	return fmt.Sprintf("%s: is %s, not a regular file", e.path, describe(e.mode))
}

func (e *notRegularError) Is(target error) bool { return target == ErrNotRegular }

// describe names the kind of file a mode describes.
func describe(mode fs.FileMode) string {
	switch {
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a device"
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a special file"
}

// tooLargeError is the error for a file over the cap of ReadFile; size is
// -1 for a file that grew past the cap while it was read.
type tooLargeError struct {
	path      string
	size, max int64
}

func tooLarge(path string, size, max int64) error { return &tooLargeError{path, size, max} }

func (e *tooLargeError) Error() string {
	if e.size < 0 {
		return fmt.Sprintf("%s: file grew past the limit of %d bytes while being read", e.path, e.max)
	}
	return fmt.Sprintf("%s: file is %d bytes, over the limit of %d", e.path, e.size, e.max)
}

func (e *tooLargeError) Is(target error) bool { return target == ErrTooLarge }
