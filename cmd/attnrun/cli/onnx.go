package cli

import (
	"fmt"
	"path/filepath"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/tensorio"
)

// isONNX tells an ONNX file from a config or preset by its extension.
func isONNX(target string) bool {
	return strings.EqualFold(filepath.Ext(target), ".onnx")
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

// formatDense prints any numeric tensor the way PyTorch would.
func formatDense(t *tensor.Dense) string {
	data, err := asFloat64(t)
	if err != nil {
		return fmt.Sprintf("<%v tensor of shape %v>", t.Dtype(), t.Shape())
	}
	f32 := make([]float32, len(data))
	for i, v := range data {
		f32[i] = float32(v)
	}
	shape := []int(t.Shape())
	if t.IsScalar() {
		shape = nil
	}
	return formatTensor(f32, shape)
}

// asFloat64 widens a tensor's elements to float64 for printing and comparing.
func asFloat64(t *tensor.Dense) ([]float64, error) {
	var out []float64
	add := func(n int, get func(i int) float64) {
		out = make([]float64, n)
		for i := range out {
			out[i] = get(i)
		}
	}
	switch d := t.Data().(type) {
	case []float32:
		add(len(d), func(i int) float64 { return float64(d[i]) })
	case []float64:
		add(len(d), func(i int) float64 { return d[i] })
	case []int64:
		add(len(d), func(i int) float64 { return float64(d[i]) })
	case []int32:
		add(len(d), func(i int) float64 { return float64(d[i]) })
	case []int8:
		add(len(d), func(i int) float64 { return float64(d[i]) })
	case []uint8:
		add(len(d), func(i int) float64 { return float64(d[i]) })
	case []bool:
		add(len(d), func(i int) float64 {
			if d[i] {
				return 1
			}
			return 0
		})
	case float32:
		out = []float64{float64(d)}
	case float64:
		out = []float64{d}
	case int64:
		out = []float64{float64(d)}
	case int32:
		out = []float64{float64(d)}
	case bool:
		out = []float64{0}
		if d {
			out[0] = 1
		}
	default:
		return nil, fmt.Errorf("dtype %v cannot be compared", t.Dtype())
	}
	return out, nil
}
