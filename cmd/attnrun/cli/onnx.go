package cli

import (
	"fmt"
	"path/filepath"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/tensorio"
)

// isONNX tells an ONNX file from a config or preset: by its content when
// the file exists (sniffPath), else by its extension.
func isONNX(target string) bool {
	switch sniffPath(target).kind {
	case kindONNX:
		return true
	case kindMissing, kindYAML:
		return hasONNXExt(target) // text named .onnx: the ONNX reader says what it is
	}
	return false
}

// hasONNXExt reports whether a file name ends in .onnx, as the files
// attnrun writes must.
func hasONNXExt(path string) bool {
	return strings.EqualFold(filepath.Ext(path), ".onnx")
}

// readArray reads an input from .npy or a serialized TensorProto (.pb) as
// an Array, zero elements and every numeric type included, within the
// codec limits lim.
func readArrayWithin(lim onnxio.Limits, path string) (*array.Array, error) {
	if strings.EqualFold(filepath.Ext(path), ".pb") {
		tp, err := lim.ReadTensorFile(path)
		if err != nil {
			return nil, err
		}
		a, err := lim.TensorToArray(tp)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return a, nil
	}
	return tensorio.Limits{MaxMemory: lim.MaxMemory}.ReadNPYArrayFile(path)
}

// readTensor reads an input tensor from .npy or a serialized TensorProto
// (.pb) within the codec's default limits.
func readTensor(path string) (*tensor.Dense, error) {
	return readTensorWithin(onnxio.DefaultLimits, path)
}

// readTensorWithin reads an input tensor within the codec limits lim.
func readTensorWithin(lim onnxio.Limits, path string) (*tensor.Dense, error) {
	if strings.EqualFold(filepath.Ext(path), ".pb") {
		tp, err := lim.ReadTensorFile(path)
		if err != nil {
			return nil, err
		}
		t, err := lim.TensorToDense(tp)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return t, nil
	}
	return tensorio.ReadNPYFile(path)
}

func describeInfos(infos []exec.TensorInfo) string {
	parts := make([]string, len(infos))
	for i, info := range infos {
		parts[i] = info.String()
	}
	return strings.Join(parts, ", ")
}
