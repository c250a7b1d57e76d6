package lift

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	ir "github.com/attnrun/attnrun/onnxio/graph"
)

// TestSplitCacheDecoders splits the KV cache off every decoder fixture:
// each past input is found with its present output, none is left, and the
// graph without its past, run on test_data_set_1 (a past of no tokens),
// gives PyTorch's logits and present caches within 1e-5 relative, 1e-6
// absolute: it is the decoder on a fresh sequence.
func TestSplitCacheDecoders(t *testing.T) {
	for _, name := range decoderFixtures {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("../../testdata/pytorch2/fixtures", name)
			m, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			var pastNames []string
			for _, in := range m.GetGraph().GetInput() {
				if strings.HasPrefix(in.GetName(), "past_key_values.") {
					pastNames = append(pastNames, in.GetName())
				}
			}
			m, _ = ir.InOrder(m)
			split, links, err := splitCache(m)
			require.NoError(t, err)
			require.Len(t, links, len(pastNames))
			for i, l := range links {
				assert.Equal(t, pastNames[i], l.past)
				assert.Equal(t, "present"+strings.TrimPrefix(l.past, "past_key_values"), l.present)
			}
			for _, in := range split.GetGraph().GetInput() {
				assert.False(t, strings.HasPrefix(in.GetName(), "past_key_values."), in.GetName())
			}

			in, want, err := onnxio.ReadDataSetArrays(filepath.Join(dir, "test_data_set_1"))
			require.NoError(t, err)
			require.Zero(t, in[2].Len(), "test_data_set_1 has no past")
			g, err := exec.New(split)
			require.NoError(t, err)
			feeds := map[string]*array.Array{}
			for i, info := range g.Inputs() {
				feeds[info.Name] = in[i]
			}
			got, err := g.RunArrays(context.Background(), feeds)
			require.NoError(t, err)
			for i, info := range m.GetGraph().GetOutput() {
				g, w := got[info.GetName()], want[i]
				require.Equal(t, w.Shape, g.Shape, info.GetName())
				gf, wf := g.Data.([]float32), w.Data.([]float32)
				for j := range wf {
					if d := math.Abs(float64(gf[j] - wf[j])); d > 1e-6+1e-5*math.Abs(float64(wf[j])) {
						require.Failf(t, "differs", "%s element %d: %g, PyTorch %g", info.GetName(), j, gf[j], wf[j])
					}
				}
			}
		})
	}
}
