package onnxio

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// readFile reads a whole file, refusing it before reading when it is larger
// than MaxFileBytes. Errors start with the path.
func (l Limits) readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError names the path
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return nil, fmt.Errorf("%s: is a directory, not an ONNX file", path)
	}
	if l.MaxFileBytes > 0 && info.Size() > l.MaxFileBytes {
		return nil, fmt.Errorf("%s: file is %d bytes, over the limit of %d: %w", path, info.Size(), l.MaxFileBytes, ErrLimit)
	}
	// The limit also guards files whose size Stat does not know (pipes)
	// or that grow while being read.
	r := io.Reader(f)
	if l.MaxFileBytes > 0 {
		r = io.LimitReader(f, l.MaxFileBytes+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if l.MaxFileBytes > 0 && int64(len(data)) > l.MaxFileBytes {
		return nil, fmt.Errorf("%s: file exceeds the limit of %d bytes: %w", path, l.MaxFileBytes, ErrLimit)
	}
	return data, nil
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it into place, so that readers see the old file or the new one, never a
// half-written one, and a failed write leaves nothing behind.
func writeFileAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
