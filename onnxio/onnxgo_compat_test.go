package onnxio

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	onnxgo "github.com/owulveryck/onnx-go"
	"github.com/owulveryck/onnx-go/backend/x/gorgonnx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// This file checks attnrun against github.com/owulveryck/onnx-go v0.5.0,
// a test-only dependency: what attnrun writes must decode there, and its
// known defects are pinned down here so that the package doc's claims stay
// true. Linking onnx-go into this test binary is itself a check: onnx-go
// registers the protobuf names onnx.ModelProto, onnx.TensorProto, ...;
// ours are attnrun.onnxsubset.*, so both coexist without a registration
// panic at start-up.

// onnxgoDecode runs onnx-go's decoder with the gorgonnx backend on data,
// turning a panic into an error.
func onnxgoDecode(data []byte) (model *onnxgo.Model, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("onnx-go panicked: %v", r)
		}
	}()
	model = onnxgo.NewModel(gorgonnx.NewGraph())
	if err := model.UnmarshalBinary(data); err != nil {
		return nil, err
	}
	return model, nil
}

func TestOnnxGoDecodesOurExport(t *testing.T) {
	m := smallModel(t)
	model, err := onnxgoDecode(mustEncode(t, m))
	require.NoError(t, err, "onnx-go must decode a MatMul/Add/Softmax model attnrun wrote")
	assert.Len(t, model.Input, 1)
	assert.Len(t, model.Output, 1)

	// And it sees our weights, number for number.
	node, ok := model.GetNodeByName("W")
	require.True(t, ok, "initializer W not found in onnx-go's graph")
	carrier, ok := node.(interface{ GetTensor() tensor.Tensor })
	require.True(t, ok, "gorgonnx node %T carries no tensor", node)
	want, err := TensorToDense(m.Graph.Initializer[0])
	require.NoError(t, err)
	assert.Equal(t, want.Data(), carrier.GetTensor().Data())
}

func TestOnnxGoPanicsOnBoolRawData(t *testing.T) {
	// The defect the package doc names: BOOL raw_data read as 8 bytes per
	// element. attnrun decodes the same file.
	data := mustEncode(t, boolMaskModel(t))
	_, err := DecodeModel(data, "", DefaultLimits)
	require.NoError(t, err)

	_, err = onnxgoDecode(data)
	require.Error(t, err, "onnx-go decoded a BOOL raw_data initializer: the documented defect is gone, update doc.go")
	t.Logf("onnx-go on a BOOL raw_data initializer: %v", err)
}

// TestOnnxGoOnTorchFixtures reports which of the PyTorch exports under
// testdata/onnx onnx-go decodes. It asserts that attnrun decodes them all,
// models and test-data sets; onnx-go's failures are logged: they are the
// reason it is not on the import path.
func TestOnnxGoOnTorchFixtures(t *testing.T) {
	var paths []string
	_ = filepath.WalkDir(filepath.Join("..", "testdata", "onnx"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(path) == ".onnx" {
			paths = append(paths, path)
		}
		return nil
	})
	if len(paths) == 0 {
		t.Skip("no PyTorch fixtures under ../testdata/onnx yet")
	}
	var ok int
	for _, path := range paths {
		_, err := ReadModel(path)
		require.NoError(t, err)
		if sets, err := DataSetDirs(filepath.Dir(path)); err == nil {
			for _, set := range sets {
				_, err := ReadDataSet(set)
				require.NoError(t, err)
			}
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		if _, err := onnxgoDecode(data); err != nil {
			t.Logf("onnx-go fails %s: %v", path, err)
			continue
		}
		ok++
		t.Logf("onnx-go decodes %s", path)
	}
	t.Logf("onnx-go decodes %d of %d PyTorch fixtures; attnrun decodes all", ok, len(paths))
}
