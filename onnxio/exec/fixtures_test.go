package exec

import (
	"path/filepath"
	"testing"

	"github.com/attnrun/attnrun/onnxio"
)

// pytorchFixtures holds the attention modules testdata/torch/export_onnx.py
// exported from PyTorch at opsets 13 to 17, static and with dynamic batch
// and sequence axes, each with test-data sets of PyTorch's outputs.
const pytorchFixtures = "../../testdata/onnx"

// TestPyTorchFixtures runs every committed PyTorch export and compares
// with PyTorch's outputs at the project's float32 tolerance (rtol 1e-5,
// atol 1e-6).
func TestPyTorchFixtures(t *testing.T) {
	models, _ := filepath.Glob(filepath.Join(pytorchFixtures, "*", "model.onnx"))
	if len(models) == 0 {
		t.Skipf("no PyTorch fixtures under %s (testdata/torch/export_onnx.py writes them)", pytorchFixtures)
	}
	for _, path := range models {
		dir := filepath.Dir(path)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			m, err := onnxio.ReadModel(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := runNodeTest(m, dir, tolerance{rtol: 1e-5, atol: 1e-6}); err != nil {
				t.Error(err)
			}
		})
	}
}
