package onnxio

import (
	"errors"
	"fmt"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/regularfile"
)

// readFile reads a whole regular file, refusing it before reading when it
// is larger than MaxFileBytes or than what mem can still hold. A FIFO, a
// device or a directory is refused without blocking. Errors start with the
// path.
func (l Limits) readFile(path string, mem *budget.Scope) ([]byte, error) {
	l = l.resolved()
	f, err := regularfile.Open(path)
	if err != nil {
		return nil, err // names the path
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > l.MaxFileBytes {
		return nil, fmt.Errorf("%s: file is %d bytes, over the limit of %d: %w", path, info.Size(), l.MaxFileBytes, ErrLimit)
	}
	if err := mem.Reserve(info.Size(), path); err != nil {
		return nil, err
	}
	data, err := regularfile.ReadAll(f, path, l.MaxFileBytes)
	if errors.Is(err, regularfile.ErrTooLarge) {
		return nil, fmt.Errorf("%w: %w", err, ErrLimit) // it grew while being read
	}
	return data, err
}
