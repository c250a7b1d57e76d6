package onnxio

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/atomicfile"
	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"google.golang.org/protobuf/proto"
)

// DataSet is one ONNX test-data set: the directory test_data_set_N with
// input_0.pb, input_1.pb, ... and output_0.pb, ..., each a serialized
// TensorProto, in the order of the graph's inputs and outputs.
type DataSet struct {
	// Dir is the directory the set was read from or is written to.
	Dir string
	// Inputs are the graph's inputs, input_K.pb in order of K.
	Inputs []*onnxpb.TensorProto
	// Outputs are the expected outputs, output_K.pb in order of K.
	Outputs []*onnxpb.TensorProto
}

// ReadTensorFile reads a serialized TensorProto (an input_K.pb or
// output_K.pb file) with DefaultLimits and validates its shape and data.
func ReadTensorFile(path string) (*onnxpb.TensorProto, error) {
	return DefaultLimits.ReadTensorFile(path)
}

// ReadTensorFile reads a serialized TensorProto and validates its shape and
// data against the limits; the file must be a regular file and is reserved
// from the memory budget. Errors start with the path.
func (l Limits) ReadTensorFile(path string) (*onnxpb.TensorProto, error) {
	mem := l.scope()
	defer mem.Release()
	return l.readTensorFile(path, mem)
}

func (l Limits) readTensorFile(path string, mem *budget.Scope) (*onnxpb.TensorProto, error) {
	data, err := l.readFile(path, mem)
	if err != nil {
		return nil, err
	}
	t, err := DecodeTensor(data, l)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// DecodeTensor decodes and validates a serialized TensorProto. External
// data is not followed: test-data files hold their data inline.
func DecodeTensor(data []byte, lim Limits) (*onnxpb.TensorProto, error) {
	if max := lim.resolved().MaxFileBytes; int64(len(data)) > max {
		return nil, fmt.Errorf("tensor is %d bytes, over the limit of %d: %w", len(data), max, ErrLimit)
	}
	t := &onnxpb.TensorProto{}
	if err := proto.Unmarshal(data, t); err != nil {
		return nil, notONNX(data, "TensorProto", err.Error())
	}
	if t.DataType == nil {
		return nil, notONNX(data, "TensorProto", "no data_type")
	}
	if isExternal(t) {
		return nil, fmt.Errorf("tensor %q: external data is not supported in a tensor file", t.GetName())
	}
	if _, err := lim.checkTensor(t); err != nil {
		return nil, fmt.Errorf("tensor %q (%s): %w", t.GetName(), tensorLabel(t), err)
	}
	return t, nil
}

// EncodeTensor serializes a TensorProto deterministically.
func EncodeTensor(t *onnxpb.TensorProto) ([]byte, error) {
	if t == nil {
		return nil, fmt.Errorf("encode tensor: nil TensorProto")
	}
	return encode(t, fmt.Sprintf("tensor %q", t.GetName()))
}

// WriteTensorFile writes a serialized TensorProto to path atomically.
func WriteTensorFile(path string, t *onnxpb.TensorProto) error {
	if t == nil {
		return fmt.Errorf("%s: nil TensorProto", path)
	}
	data, err := EncodeTensor(t)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return atomicfile.WriteFile(path, data, 0o644)
}

// dataFileName matches the files of a test-data set.
var dataFileName = regexp.MustCompile(`^(input|output)_(0|[1-9][0-9]*)\.pb$`)

// ReadDataSet reads the test-data set in dir with DefaultLimits.
func ReadDataSet(dir string) (*DataSet, error) {
	return DefaultLimits.ReadDataSet(dir)
}

// ReadDataSet reads the test-data set in dir: every input_K.pb and
// output_K.pb, which must be numbered from 0 without gaps. Other files are
// ignored. The set's files together are reserved from the memory budget;
// each must be a regular file.
func (l Limits) ReadDataSet(dir string) (*DataSet, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	// Indices come from file names, so they size nothing: a set of n
	// input files must be input_0.pb ... input_{n-1}.pb.
	files := map[string][]string{}
	for _, e := range entries {
		if m := dataFileName.FindStringSubmatch(e.Name()); m != nil && !e.IsDir() {
			files[m[1]] = append(files[m[1]], e.Name())
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no input_K.pb or output_K.pb files: not a test-data set", dir)
	}
	mem := l.scope()
	defer mem.Release()
	ds := &DataSet{Dir: dir}
	if ds.Inputs, err = l.readTensorFiles(dir, "input", files["input"], mem); err != nil {
		return nil, err
	}
	if ds.Outputs, err = l.readTensorFiles(dir, "output", files["output"], mem); err != nil {
		return nil, err
	}
	return ds, nil
}

// ReadDataSetArrays reads the test-data set in dir with DefaultLimits
// and converts its tensors; see Limits.ReadDataSetArrays.
func ReadDataSetArrays(dir string) (inputs, outputs []*array.Array, err error) {
	return DefaultLimits.ReadDataSetArrays(dir)
}

// ReadDataSetArrays reads the test-data set in dir as ReadDataSet does and
// converts every tensor to an *array.Array (TensorToArray): zero-element
// tensors, float16 and every other numeric type included. Errors name the
// file.
func (l Limits) ReadDataSetArrays(dir string) (inputs, outputs []*array.Array, err error) {
	ds, err := l.ReadDataSet(dir)
	if err != nil {
		return nil, nil, err
	}
	if inputs, err = l.tensorsToArrays(dir, "input", ds.Inputs); err != nil {
		return nil, nil, err
	}
	if outputs, err = l.tensorsToArrays(dir, "output", ds.Outputs); err != nil {
		return nil, nil, err
	}
	return inputs, outputs, nil
}

// tensorsToArrays converts the tensors of prefix_K.pb files of dir.
func (l Limits) tensorsToArrays(dir, prefix string, tensors []*onnxpb.TensorProto) ([]*array.Array, error) {
	out := make([]*array.Array, len(tensors))
	for k, tp := range tensors {
		a, err := l.TensorToArray(tp)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, fmt.Sprintf("%s_%d.pb", prefix, k)), err)
		}
		out[k] = a
	}
	return out, nil
}

// ArraysToTensors converts arrays to TensorProtos named by names, in
// order, for the Inputs or Outputs of a DataSet to write with
// WriteDataSet.
func ArraysToTensors(names []string, arrays []*array.Array) ([]*onnxpb.TensorProto, error) {
	if len(names) != len(arrays) {
		return nil, fmt.Errorf("%d names for %d arrays", len(names), len(arrays))
	}
	out := make([]*onnxpb.TensorProto, len(arrays))
	for i, a := range arrays {
		tp, err := ArrayToTensor(names[i], a)
		if err != nil {
			return nil, err
		}
		out[i] = tp
	}
	return out, nil
}

// readTensorFiles reads the files named prefix_K.pb found in dir, which
// must be prefix_0.pb ... prefix_{n-1}.pb for n names.
func (l Limits) readTensorFiles(dir, prefix string, names []string, mem *budget.Scope) ([]*onnxpb.TensorProto, error) {
	present := map[string]bool{}
	for _, name := range names {
		present[name] = true
	}
	out := make([]*onnxpb.TensorProto, len(names))
	for k := range out {
		name := fmt.Sprintf("%s_%d.pb", prefix, k)
		path := filepath.Join(dir, name)
		if !present[name] {
			return nil, fmt.Errorf("%s is missing: test-data files are numbered from 0 without gaps; with %s present, %s is out of range",
				path, plural(len(names), prefix+" file"), outOfRange(names, len(names)))
		}
		t, err := l.readTensorFile(path, mem)
		if err != nil {
			return nil, err
		}
		out[k] = t
	}
	return out, nil
}

// plural writes "1 input file", "2 input files".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// outOfRange returns the name in names whose index is n or more; when
// indices 0..n-1 are not all present among n distinct names, one is.
func outOfRange(names []string, n int) string {
	for _, name := range names {
		m := dataFileName.FindStringSubmatch(name)
		if k, err := strconv.Atoi(m[2]); err != nil || k >= n {
			return name
		}
	}
	return "?"
}

// WriteDataSet writes ds.Inputs and ds.Outputs as input_K.pb and
// output_K.pb in dir, creating it if needed, each file atomically.
// Numbered files left in dir from a larger earlier set are removed, so that
// reading dir back gives exactly ds.
func WriteDataSet(dir string, ds *DataSet) error {
	if ds == nil {
		return fmt.Errorf("%s: nil DataSet", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, part := range []struct {
		prefix  string
		tensors []*onnxpb.TensorProto
	}{{"input", ds.Inputs}, {"output", ds.Outputs}} {
		for k, t := range part.tensors {
			if err := WriteTensorFile(filepath.Join(dir, fmt.Sprintf("%s_%d.pb", part.prefix, k)), t); err != nil {
				return err
			}
		}
		if err := removeStale(dir, part.prefix, len(part.tensors)); err != nil {
			return err
		}
	}
	return nil
}

// removeStale removes prefix_K.pb files with K >= n from dir.
func removeStale(dir, prefix string, n int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		m := dataFileName.FindStringSubmatch(e.Name())
		if m == nil || m[1] != prefix || e.IsDir() {
			continue
		}
		if k, err := strconv.Atoi(m[2]); err != nil || k >= n {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// DataSetDirs lists the test-data sets under dir, in numeric order of N:
// its test_data_set_N subdirectories, or dir itself when it holds
// input_K.pb/output_K.pb files directly (when it is one set).
func DataSetDirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type set struct {
		n    int
		path string
	}
	var sets []set
	for _, e := range entries {
		if !e.IsDir() && dataFileName.MatchString(e.Name()) {
			return []string{dir}, nil
		}
		suffix, ok := strings.CutPrefix(e.Name(), "test_data_set_")
		if !ok || !e.IsDir() {
			continue
		}
		n, err := strconv.Atoi(suffix)
		if err != nil || n < 0 {
			continue
		}
		sets = append(sets, set{n, filepath.Join(dir, e.Name())})
	}
	if len(sets) == 0 {
		return nil, fmt.Errorf("%s: no test_data_set_N directories and no input_K.pb/output_K.pb files", dir)
	}
	slices.SortFunc(sets, func(a, b set) int { return a.n - b.n })
	paths := make([]string, len(sets))
	for i, s := range sets {
		paths[i] = s.path
	}
	return paths, nil
}
