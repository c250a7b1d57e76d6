package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/tensorfmt"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/tensorio"
)

// outputDest is where `attnrun run FILE.onnx` puts the graph's outputs:
// printed (the zero value), one file per output, a directory with a .npy
// per output, or one .npz with a member per output.
type outputDest struct {
	files   []string // in the order of the outputs: .npy, or .pb for a TensorProto
	dir     string   // <dir>/<key>.npy
	archive string   // <archive>.npz, members <key>.npy
	keys    []string // the outputs' names, made file names (outputKeys)
}

// outputDestination reads the --output flags of a run of model, whose
// outputs are names: none prints them; one path per output writes each
// (.pb as a TensorProto, anything else as .npy); a single .npz writes them
// all into it, and a single directory (an existing one, a path ending in
// a separator, or any path other than .npy or .pb when there are several
// outputs) one .npy per output, named after it.
func outputDestination(model string, names, paths []string) (outputDest, error) {
	several := func() error {
		return usageError{fmt.Errorf("%s has %d outputs (%s): give %d --output files, or one directory or .npz for all of them",
			model, len(names), strings.Join(names, ", "), len(names))}
	}
	if len(paths) == 0 {
		return outputDest{}, nil
	}
	if len(paths) > 1 {
		if len(paths) != len(names) {
			return outputDest{}, several()
		}
		return outputDest{files: paths}, nil
	}
	p, ext := paths[0], strings.ToLower(filepath.Ext(paths[0]))
	info, statErr := os.Stat(p)
	var d outputDest
	switch {
	case ext == ".npz":
		d.archive = p
	case statErr == nil && info.IsDir() || strings.HasSuffix(p, string(os.PathSeparator)):
		d.dir = p
	case len(names) == 1:
		return outputDest{files: paths}, nil
	case ext == ".npy" || ext == ".pb":
		return outputDest{}, several()
	default:
		d.dir = p
	}
	keys, err := outputKeys(names)
	if err != nil {
		return outputDest{}, err
	}
	d.keys = keys
	return d, nil
}

// outputKeys makes output names file names: every run of characters other
// than letters, digits, '_', '.' and '-' becomes '_' ("present.0.key"
// stays, "onnx::Add_3" becomes "onnx_Add_3"), so that a name from the file
// never leaves the output directory. Two names that give one key are an
// error.
func outputKeys(names []string) ([]string, error) {
	keys := make([]string, len(names))
	seen := map[string]string{}
	for i, name := range names {
		key := unsafeKey.ReplaceAllString(name, "_")
		if err := fileNameError(key); err != nil {
			return nil, fmt.Errorf("output %q cannot name a file: %w", name, err)
		}
		if other, dup := seen[key]; dup {
			return nil, fmt.Errorf("outputs %q and %q would both be written as %s", other, name, key)
		}
		seen[key], keys[i] = name, key
	}
	return keys, nil
}

// write prints the outputs or writes them where d says.
func (d outputDest) write(stdout io.Writer, names []string, outs []*array.Array) error {
	switch {
	case d.archive != "":
		return tensorio.WriteNPZArrays(d.archive, d.keys, outs)
	case d.dir != "":
		if err := os.MkdirAll(d.dir, 0o755); err != nil {
			return err
		}
		for i, out := range outs {
			if err := tensorio.WriteNPYArrayFile(filepath.Join(d.dir, d.keys[i]+".npy"), out); err != nil {
				return err
			}
		}
	case d.files != nil:
		for i, out := range outs {
			if err := writeArrayFile(d.files[i], names[i], out); err != nil {
				return err
			}
		}
	default:
		for i, out := range outs {
			if len(outs) > 1 {
				fmt.Fprintf(stdout, "%s:\n", names[i])
			}
			fmt.Fprintln(stdout, tensorfmt.Array(out))
		}
	}
	return nil
}

// writeArrayFile writes one output: a serialized TensorProto named name
// for a .pb path, which keeps every ONNX type; .npy otherwise.
func writeArrayFile(path, name string, a *array.Array) error {
	if !strings.EqualFold(filepath.Ext(path), ".pb") {
		return tensorio.WriteNPYArrayFile(path, a)
	}
	tp, err := onnxio.ArrayToTensor(name, a)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return onnxio.WriteTensorFile(path, tp)
}
