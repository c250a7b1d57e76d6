package attnrun

import (
	"fmt"
	"path/filepath"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/tensorio"
)

// ReadTensor reads one tensor from a file: a NumPy .npy array, or a
// serialized ONNX TensorProto (.pb), the form of the input_N.pb and
// output_N.pb files of ONNX test-data sets. Sizes are checked before
// anything is allocated, within WithMaxMemory's budget (4 GiB by default;
// the other options do not apply). A tensor of zero elements, which a
// *tensor.Dense cannot hold, is an error: ReadArray reads it.
func ReadTensor(path string, opts ...Option) (*tensor.Dense, error) {
	a, err := ReadArray(path, opts...)
	if err != nil {
		return nil, err
	}
	t, err := a.Dense()
	if err != nil {
		return nil, fmt.Errorf("%s: %w (attnrun.ReadArray reads it)", path, err)
	}
	return t, nil
}

// ReadArray reads a tensor file as ReadTensor does, into an array.Array:
// every element type (float16 and bfloat16 as their values), and tensors of
// zero elements.
func ReadArray(path string, opts ...Option) (*array.Array, error) {
	s := settingsOf(opts)
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy":
		return tensorio.Limits{MaxMemory: s.maxMemory}.ReadNPYArrayFile(path)
	case ".pb":
		codec := s.codec()
		tp, err := codec.ReadTensorFile(path)
		if err != nil {
			return nil, err
		}
		a, err := codec.TensorToArray(tp)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return a, nil
	}
	return nil, fmt.Errorf("%s: want a .npy array or a .pb TensorProto", path)
}
