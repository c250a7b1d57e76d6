package layers

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
)

// patchCase is one entry of testdata/patch_embedding_cases.json, written by
// testdata/patch_embedding_cases.py with PyTorch.
type patchCase struct {
	Config map[string]any   `json:"config"`
	Params map[string]array `json:"params"`
	Input  array            `json:"input"`
	Output array            `json:"output"`
}

var loadPatchCases = goldenCases[patchCase]("patch_embedding_cases.json")

// patchModel is a model of the case's one nn.patch_embedding layer on input
// x, with PyTorch's parameters.
func patchModel(t *testing.T, c patchCase) *models.Model {
	t.Helper()
	config, err := json.Marshal(c.Config) // JSON is YAML
	require.NoError(t, err)
	fields := strings.TrimSuffix(strings.TrimPrefix(string(config), "{"), "}")
	m, err := models.Parse([]byte(fmt.Sprintf("name: patches\ninputs: [x]\nlayers:\n  - {name: embeddings, type: nn.patch_embedding, %s}\n", fields)), "patches.yaml")
	require.NoError(t, err)
	require.NoError(t, m.Init(1))
	require.Len(t, m.Params(), len(c.Params))
	for _, p := range m.Params() {
		want, ok := c.Params[strings.TrimPrefix(p.Name, "embeddings.")]
		require.True(t, ok, "PyTorch has no parameter %q", p.Name)
		require.Equal(t, want.Shape, []int(p.Value.Shape()), p.Name)
		copy(floats(p.Value), want.Data)
	}
	m.ParamsChanged()
	return m
}

// TestPatchEmbeddingAgainstPyTorch runs nn.patch_embedding on PyTorch's
// images with its weights (ViT's Conv2d, CLS token and positions; without
// either; positions alone), then its ONNX export on the executor at every
// opset: outputs within 1e-5 relative and 1e-6 absolute of PyTorch's.
func TestPatchEmbeddingAgainstPyTorch(t *testing.T) {
	cases, err := loadPatchCases()
	require.NoError(t, err)
	require.Len(t, cases, 3)
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m := patchModel(t, c)
			out, err := m.Forward(nil, c.Input.dense())
			require.NoError(t, err)
			require.Equal(t, c.Output.Shape, []int(out.Shape()))
			assertClose(t, c.Output.Data, floats(out), 1e-6, 1e-5, "forward")

			for opset := export.MinOpset; opset <= export.MaxOpset; opset++ {
				pb, err := export.Model(m, export.Options{Opset: opset})
				require.NoError(t, err, "opset %d", opset)
				data, err := onnxio.EncodeModel(pb)
				require.NoError(t, err)
				pb, err = onnxio.DecodeModel(data, "", onnxio.DefaultLimits)
				require.NoError(t, err)
				g, err := exec.New(pb)
				require.NoError(t, err)
				got, err := g.Run(map[string]*tensor.Dense{"x": c.Input.dense()})
				require.NoError(t, err, "opset %d", opset)
				require.Equal(t, c.Output.Shape, []int(got["y"].Shape()), "opset %d", opset)
				assertClose(t, c.Output.Data, got["y"].Data().([]float32), 1e-6, 1e-5, fmt.Sprintf("export at opset %d", opset))
			}
		})
	}
}

// The layer refuses images of another channel count or size, and configs
// whose patches do not tile the image.
func TestPatchEmbeddingRefuses(t *testing.T) {
	l := fromYAML(t, "nn.patch_embedding", "{channels: 3, image_size: 8, patch_size: 4, d_out: 6, cls_token: true}")
	require.NoError(t, l.Validate())
	rng := rand.New(rand.NewPCG(1, 2))
	for _, x := range []*tensor.Dense{randomDense(rng, 2, 2, 8, 8), randomDense(rng, 2, 3, 8, 4), randomDense(rng, 3, 8, 8)} {
		_, err := l.Forward(nil, []*tensor.Dense{x})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "want (B, 3, 8, 8)")
	}
	bad := fromYAML(t, "nn.patch_embedding", "{channels: 3, image_size: 8, patch_size: 3, d_out: 6}")
	assert.ErrorContains(t, bad.Validate(), "patch_size 3 does not divide image_size 8")
}
