package onnxio

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// onnxBackendTests is where Debian's libonnx-testdata installs ONNX's
// backend tests: node/ (one case per operator, written by the onnx Python
// package), pytorch-converted/ and pytorch-operator/ (old PyTorch exports)
// and simple/, each case a model.onnx with test-data sets.
const onnxBackendTests = "/usr/include/onnx/backend/test/data"

// TestDecodeONNXBackendTests decodes every model and every tensor file of
// ONNX's own backend tests: files from the reference writer and from
// PyTorch, with every data type and attribute kind the operators use. It
// also checks that every model re-encodes to the same bytes (the reference
// writer orders fields by number, as protobuf-go does).
func TestDecodeONNXBackendTests(t *testing.T) {
	models, _ := filepath.Glob(filepath.Join(onnxBackendTests, "*", "test_*", "model.onnx"))
	if len(models) == 0 {
		t.Skipf("no ONNX backend tests under %s (apt-get install libonnx-testdata)", onnxBackendTests)
	}
	var decoded, identical, tensors int
	for _, path := range models {
		m, err := ReadModel(path)
		if !assert.NoError(t, err) {
			continue
		}
		decoded++
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		if again := mustEncode(t, m); bytes.Equal(raw, again) {
			identical++
		} else {
			t.Logf("%s: re-encoded model differs from the file", path)
		}

		sets, err := DataSetDirs(filepath.Dir(path))
		if err != nil {
			continue // a few cases ship without data
		}
		for _, set := range sets {
			tensors += checkNodeTestSet(t, m, set)
		}
	}
	t.Logf("%d of %d models decoded, %d byte-identical after re-encoding; %d tensor files decoded",
		decoded, len(models), identical, tensors)
	assert.Equal(t, len(models), identical, "every model should decode and re-encode byte-identically")
}

// checkNodeTestSet decodes the tensor files of one set whose graph inputs
// and outputs are tensors (sequence and optional values use other
// messages), converting the types TensorToDense supports.
func checkNodeTestSet(t *testing.T, m *onnxpb.ModelProto, set string) int {
	n := 0
	for _, part := range []struct {
		prefix string
		values []*onnxpb.ValueInfoProto
	}{{"input", m.Graph.Input}, {"output", m.Graph.Output}} {
		for k, vi := range part.values {
			if vi.GetType().GetTensorType() == nil {
				continue
			}
			path := filepath.Join(set, fmt.Sprintf("%s_%d.pb", part.prefix, k))
			if _, err := os.Stat(path); err != nil {
				continue // optional inputs left out
			}
			tp, err := ReadTensorFile(path)
			if !assert.NoError(t, err) {
				continue
			}
			n++
			if supportedConversion(tp) {
				_, err := TensorToDense(tp)
				assert.NoError(t, err, path)
			}
		}
	}
	return n
}

func supportedConversion(tp *onnxpb.TensorProto) bool {
	elems, _ := DefaultLimits.CheckDims(tp.Dims, 8)
	switch DataType(tp.GetDataType()) {
	case Float, Float64, Float16, BFloat16, Int64, Int32, Int8, Uint8, Bool:
		return elems > 0
	}
	return false
}
