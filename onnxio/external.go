package onnxio

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// externalLoader reads tensor data stored in files next to the model (the
// ONNX external data convention: external_data entries "location",
// "offset", "length", "checksum") and moves it into raw_data.
//
// Locations are opened through an os.Root on the model's directory, so a
// location can neither climb out of it with ".." or an absolute path nor
// escape through a symbolic link.
type externalLoader struct {
	dir   string
	lim   Limits
	root  *os.Root // opened on first use
	total int64    // bytes loaded so far, against lim.MaxExternalBytes
}

func (x *externalLoader) close() {
	if x.root != nil {
		x.root.Close()
	}
}

// load reads the external data of t, which must come to want bytes, into
// t.RawData and marks t as holding its data inline.
func (x *externalLoader) load(t *onnxpb.TensorProto, want int64) error {
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
	if !filepath.IsLocal(filepath.FromSlash(location)) {
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

	path := filepath.Join(x.dir, filepath.FromSlash(location))
	if x.root == nil {
		if x.root, err = os.OpenRoot(x.dir); err != nil {
			return fmt.Errorf("external data file %s: %w", path, err)
		}
	}
	f, err := x.root.Open(filepath.FromSlash(location))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("external data file %s is missing", path)
	}
	if err != nil {
		return fmt.Errorf("external data file %s: %w", path, err)
	}
	defer f.Close()
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
	if x.lim.MaxExternalBytes > 0 && x.total+length > x.lim.MaxExternalBytes {
		return fmt.Errorf("external data file %s: loading %d more bytes exceeds the limit of %d bytes per model: %w",
			path, length, x.lim.MaxExternalBytes, ErrLimit)
	}

	data := make([]byte, length)
	if _, err := io.ReadFull(io.NewSectionReader(f, offset, length), data); err != nil {
		return fmt.Errorf("external data file %s: %w", path, err)
	}
	x.total += length
	t.RawData = data
	t.ExternalData = nil
	t.DataLocation = nil
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
