package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/tensorfmt"
	"github.com/attnrun/attnrun/tensorio"
)

// Batch runs: `attnrun run MODEL --input DIR|X.npz` runs the model once per
// tensor (every .npy or .pb file of DIR in name order, or every array of
// the archive in its order), shows progress on a terminal, and prints the
// outputs or writes them under the inputs' names (--output DIR, or
// --output Y.npz). An input that fails is reported and counted, and the
// others still run.

// batchItem is one input of a batch run.
type batchItem struct {
	// name is what messages and printed output call it: the file name, or
	// the archive key.
	name string
	// stem names its output: the file name without extension, or the key.
	stem string
	// path is the file to read; empty for an archive member, whose tensor
	// is read already.
	path   string
	tensor *tensor.Dense
	// lim bounds reading the file.
	lim *limits
}

// load returns the item's tensor, reading its file if it has one.
func (it batchItem) load() (*tensor.Dense, error) {
	if it.path == "" {
		return it.tensor, nil
	}
	x, err := it.lim.readTensor(it.path)
	return x, it.lim.explain(err)
}

// batchInput tells whether the --input flags ask for a batch run: one
// --input naming a directory or an .npz archive.
func batchInput(paths []string) (string, bool) {
	if len(paths) != 1 {
		return "", false
	}
	if strings.EqualFold(filepath.Ext(paths[0]), ".npz") {
		return paths[0], true
	}
	info, err := os.Stat(paths[0])
	return paths[0], err == nil && info.IsDir()
}

// listBatch lists the inputs of a batch: the .npy and .pb files of a
// directory, sorted by name, or the arrays of an .npz archive.
func listBatch(lim *limits, path string) ([]batchItem, error) {
	if strings.EqualFold(filepath.Ext(path), ".npz") {
		names, tensors, err := lim.files().ReadNPZ(path)
		if err != nil {
			return nil, err
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%s: the archive holds no arrays", path)
		}
		items := make([]batchItem, len(names))
		for i, name := range names {
			items[i] = batchItem{name: name, stem: name, tensor: tensors[i]}
		}
		return items, nil
	}
	entries, err := os.ReadDir(path) // sorted by file name
	if err != nil {
		return nil, err
	}
	var items []batchItem
	stems := map[string]string{}
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || ext != ".npy" && ext != ".pb" {
			continue
		}
		stem := strings.TrimSuffix(e.Name(), filepath.Ext(e.Name()))
		if other, dup := stems[stem]; dup {
			return nil, fmt.Errorf("%s: %s and %s would both write the output %s.npy", path, other, e.Name(), stem)
		}
		stems[stem] = e.Name()
		items = append(items, batchItem{name: e.Name(), stem: stem, path: filepath.Join(path, e.Name()), lim: lim})
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%s: no .npy or .pb files to run", path)
	}
	return items, nil
}

// batchSink is where a batch's outputs go: printed, one .npy per output in
// a directory, or one .npz archive.
type batchSink struct {
	stdout io.Writer
	// outputs names the outputs of one run; a single output is unnamed
	// in files.
	outputs []string
	dir     string // write <dir>/<stem>.npy
	archive string // write one .npz at the end
	keys    []string
	tensors []*tensor.Dense
}

// newBatchSink prepares the destination of a batch read from input: dest
// is "" (print), an .npz file or a directory, created if needed, which
// may not be the input directory (outputs would replace inputs).
func newBatchSink(stdout io.Writer, input, dest string, outputs []string) (*batchSink, error) {
	s := &batchSink{stdout: stdout, outputs: outputs}
	switch {
	case dest == "":
	case strings.EqualFold(filepath.Ext(dest), ".npz"):
		s.archive = dest
	default:
		if err := os.MkdirAll(dest, 0o755); err != nil {
			return nil, err
		}
		if in, err := os.Stat(input); err == nil {
			if out, err := os.Stat(dest); err == nil && os.SameFile(in, out) {
				return nil, usageError{fmt.Errorf("--output %s is the input directory: the outputs would replace the inputs", dest)}
			}
		}
		s.dir = dest
	}
	return s, nil
}

// checkNames refuses, before anything runs, item names that would not be
// one plain file name inside the output directory (or one member name in
// the output archive): names come from files (.npz keys), and a key such
// as "../../x" must not write outside --output. Printed outputs need no
// check.
func (s *batchSink) checkNames(items []batchItem) error {
	if s.dir == "" && s.archive == "" {
		return nil
	}
	for _, it := range items {
		if err := fileNameError(it.stem); err != nil {
			return fmt.Errorf("input %q cannot name an output file: %w", it.name, err)
		}
	}
	return nil
}

// fileNameError says why name is not a single local file name: empty, "."
// or "..", absolute, with a path separator or a NUL byte, or reserved by
// the platform. A name that passes, joined to a directory, stays in it
// (a symbolic link already at that name is replaced, not followed).
func fileNameError(name string) error {
	switch {
	case name == "":
		return errors.New("the name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a file name", name)
	case strings.ContainsAny(name, `/\`):
		return errors.New("the name contains a path separator")
	case strings.ContainsRune(name, 0):
		return errors.New("the name contains a NUL byte")
	case !filepath.IsLocal(name):
		return errors.New("the name is not a local file name")
	}
	return nil
}

// unsafeKey matches what may not appear in a file name made from an output
// name ("onnx::MatMul_3", "attn/out").
var unsafeKey = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// key names output i of an item in files: the stem, and the output's name
// when there are several.
func (s *batchSink) key(it batchItem, i int) string {
	if len(s.outputs) == 1 {
		return it.stem
	}
	return it.stem + "." + unsafeKey.ReplaceAllString(s.outputs[i], "_")
}

// put prints or writes one item's outputs.
func (s *batchSink) put(it batchItem, outs []*tensor.Dense) error {
	for i, out := range outs {
		switch {
		case s.dir != "":
			if err := tensorio.WriteNPYFile(filepath.Join(s.dir, s.key(it, i)+".npy"), out); err != nil {
				return err
			}
		case s.archive != "":
			s.keys = append(s.keys, s.key(it, i))
			s.tensors = append(s.tensors, out)
		default:
			if len(outs) > 1 {
				fmt.Fprintf(s.stdout, "%s (%s):\n", it.name, s.outputs[i])
			} else {
				fmt.Fprintf(s.stdout, "%s:\n", it.name)
			}
			fmt.Fprintln(s.stdout, tensorfmt.Dense(out))
		}
	}
	return nil
}

// close writes the archive, if the outputs go to one.
func (s *batchSink) close() error {
	if s.archive == "" || len(s.keys) == 0 {
		return nil
	}
	return tensorio.WriteNPZ(s.archive, s.keys, s.tensors)
}

// errBatch is returned when a batch ran but some inputs failed.
type errBatch struct{ failed, total int }

func (e errBatch) Error() string {
	return fmt.Sprintf("%d of %s failed", e.failed, plural(e.total, "input"))
}

// runBatch runs every item through run, with progress on stderr, and
// hands the outputs to sink. A failing item is reported on stderr and
// counted; the error at the end says how many failed.
func runBatch(stderr io.Writer, items []batchItem, sink *batchSink, run func(*tensor.Dense) ([]*tensor.Dense, error)) error {
	if err := sink.checkNames(items); err != nil {
		return err
	}
	p := startProgress(stderr, len(items), "input")
	for _, it := range items {
		err := runItem(it, sink, p, run)
		if err != nil {
			p.hide()
			fmt.Fprintf(stderr, "%s: %v\n", it.name, err)
		}
		p.advance(err != nil)
	}
	p.finish()
	if err := sink.close(); err != nil {
		return err
	}
	if p.failed > 0 {
		return errBatch{p.failed, len(items)}
	}
	return nil
}

// runItem runs one item and passes its outputs on.
func runItem(it batchItem, sink *batchSink, p *progress, run func(*tensor.Dense) ([]*tensor.Dense, error)) error {
	x, err := it.load()
	if err != nil {
		return err
	}
	outs, err := run(x)
	if err != nil {
		return err
	}
	if sink.dir == "" && sink.archive == "" {
		p.hide() // the outputs print on the terminal the bar is on
	}
	return sink.put(it, outs)
}

// fileExts are extensions of files, never of the directory a batch run
// writes into: `-o outs.npy` over many inputs is a mistake, not a folder
// to create.
var fileExts = map[string]bool{".npy": true, ".pb": true, ".onnx": true, ".safetensors": true,
	".yaml": true, ".yml": true, ".png": true, ".txt": true, ".json": true}

// checkBatchDest refuses an --output for a run over many inputs that
// names a single file.
func checkBatchDest(batch, dest string) error {
	ext := strings.ToLower(filepath.Ext(dest))
	if !fileExts[ext] {
		return nil
	}
	if info, err := os.Stat(dest); err == nil && info.IsDir() {
		return nil
	}
	stem := strings.TrimSuffix(dest, filepath.Ext(dest))
	return usageError{fmt.Errorf("-o %s: a run over %s writes one output per input, not one %s file: give -o %s.npz (one archive) or -o %s/ (a directory of .npy files)",
		dest, batch, ext, stem, stem)}
}
