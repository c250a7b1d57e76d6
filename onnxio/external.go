package onnxio

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/regularfile"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// externalLoader reads tensor data stored in files next to the model (the
// ONNX external data convention: external_data entries "location",
// "offset", "length", "checksum") and moves it into raw_data.
//
// It works in two passes. locate checks every entry against its file
// (location inside the model's directory, a regular file, offset and length
// within it, length matching the tensor's shape) without reading data; load
// then checks the total against MaxTotalBytes and the memory budget
// before it reads anything, so a model cannot load 4 GiB and then be
// refused. With ExternalSizesOnly only the first pass runs.
//
// Locations are opened through an os.Root on the model's directory, so a
// location can neither climb out of it with ".." or an absolute path nor
// escape through a symbolic link.
type externalLoader struct {
	dir   string
	root  *os.Root            // opened on first use
	files map[string]*os.File // open data files by location
	refs  []externalRef       // located entries, in model order
}

// externalRef is one tensor's external data, checked against its file.
type externalRef struct {
	t      *onnxpb.TensorProto
	where  string // locates the tensor in errors: `initializer "w" (FLOAT [3 3])`
	path   string // the data file, for errors
	file   *os.File
	offset int64
	length int64
}

func (x *externalLoader) close() {
	for _, f := range x.files {
		f.Close()
	}
	if x.root != nil {
		x.root.Close()
	}
}

// locate checks the external data entries of t, which must come to want
// bytes, against the file they name, and records them for load.
func (x *externalLoader) locate(t *onnxpb.TensorProto, where string, want int64) error {
	var location, offsetText, lengthText string
	for _, e := range t.ExternalData {
		switch e.GetKey() {
		case "location":
			location = e.GetValue()
		case "offset":
			offsetText = e.GetValue()
		case "length":
			lengthText = e.GetValue()
		}
	}
	if location == "" {
		return errors.New(`external data has no "location" entry`)
	}
	if DataType(t.GetDataType()) == onnxpb.TensorProto_STRING {
		return errors.New("STRING tensors cannot use external data")
	}
	name := filepath.FromSlash(location)
	if !filepath.IsLocal(name) {
		return fmt.Errorf("external data location %q leaves the model's directory", location)
	}
	if x.dir == "" {
		return fmt.Errorf("external data file %q: the model's directory is unknown (pass it to DecodeModel)", location)
	}
	offset, err := parseExternalInt("offset", offsetText)
	if err != nil {
		return err
	}
	length, err := parseExternalInt("length", lengthText)
	if err != nil {
		return err
	}

	path := filepath.Join(x.dir, name)
	f, err := x.open(name, path)
	if err != nil {
		return err
	}
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("external data file %s: %w", path, err)
	}
	size := info.Size()
	if offset > size {
		return fmt.Errorf("external data file %s: offset %d is past its end (%d bytes)", path, offset, size)
	}
	if lengthText == "" {
		length = size - offset
	}
	if length != want {
		return fmt.Errorf("external data file %s: tensor needs %d bytes, the entry gives %d", path, want, length)
	}
	if length > size-offset {
		return fmt.Errorf("external data file %s: %d bytes at offset %d run past its end (%d bytes)", path, length, offset, size)
	}
	x.refs = append(x.refs, externalRef{t: t, where: where, path: path, file: f, offset: offset, length: length})
	return nil
}

// open returns the data file at location name (path for messages), opening
// it once however many tensors it holds. Only regular files are opened, and
// without blocking: a FIFO named as external data is refused at once.
func (x *externalLoader) open(name, path string) (*os.File, error) {
	if f, ok := x.files[name]; ok {
		return f, nil
	}
	if x.root == nil {
		root, err := os.OpenRoot(x.dir)
		if err != nil {
			return nil, fmt.Errorf("external data file %s: %w", path, err)
		}
		x.root, x.files = root, map[string]*os.File{}
	}
	f, err := regularfile.OpenInRoot(x.root, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("external data file %s is missing", path)
	case errors.Is(err, regularfile.ErrNotRegular):
		return nil, fmt.Errorf("external data: %w", err)
	case err != nil:
		return nil, fmt.Errorf("external data file %s: %w", path, err)
	}
	x.files[name] = f
	return f, nil
}

// load reads every located entry into its tensor's raw_data. Before it
// reads anything, it checks the running total against lim.MaxTotalBytes
// and reserves each entry from mem, so that the error names the tensor
// that crosses the line.
func (x *externalLoader) load(lim Limits, mem *budget.Scope) error {
	lim = lim.resolved()
	var total int64
	for _, r := range x.refs {
		total = min(total, math.MaxInt64-r.length) + r.length // saturating
		if total > lim.MaxTotalBytes {
			return fmt.Errorf("%s: external data file %s: loading %d more bytes brings the model's external data to %d, over the limit of %d bytes per model: %w",
				r.where, r.path, r.length, total, lim.MaxTotalBytes, ErrLimit)
		}
		if err := mem.Reserve(r.length, fmt.Sprintf("%s: external data file %s", r.where, r.path)); err != nil {
			return err
		}
	}
	for _, r := range x.refs {
		data := make([]byte, r.length)
		if _, err := io.ReadFull(io.NewSectionReader(r.file, r.offset, r.length), data); err != nil {
			return fmt.Errorf("%s: external data file %s: %w", r.where, r.path, err)
		}
		r.t.RawData = data
		r.t.ExternalData = nil
		r.t.DataLocation = nil
	}
	return nil
}

// parseExternalInt parses an offset or length entry; an absent one is 0.
func parseExternalInt(key, text string) (int64, error) {
	if text == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("external data %s %q is not a non-negative integer", key, text)
	}
	return v, nil
}
