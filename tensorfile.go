package attnrun

import (
	"fmt"
	"path/filepath"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/tensorio"
)

// ReadTensor reads one tensor from a file: a NumPy .npy array, or a
// serialized ONNX TensorProto (.pb), the form of the input_N.pb and
// output_N.pb files of ONNX test-data sets. Sizes are checked before
// anything is allocated (4 GiB at most).
func ReadTensor(path string) (*tensor.Dense, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy":
		return tensorio.ReadNPYFile(path)
	case ".pb":
		tp, err := onnxio.ReadTensorFile(path)
		if err != nil {
			return nil, err
		}
		t, err := onnxio.TensorToDense(tp)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return t, nil
	}
	return nil, fmt.Errorf("%s: want a .npy array or a .pb TensorProto", path)
}
