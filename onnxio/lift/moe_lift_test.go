package lift_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
)

// nn.moe's own export (router TopK, experts gathered by the chosen
// indices) lifts back by structure, without the metadata: Mixtral's block
// with its defaults, and Qwen2-MoE's without renormalization and with the
// shared expert, its Sigmoid gate and Add inside the layer. (The exporters'
// graphs of both: TestImportEveryPyTorch2Fixture/qwen2_moe_sdpa_ts17 and
// the live cross-check.)
func TestLiftMoEExport(t *testing.T) {
	m, inputs := roundTripModel(t, "moe")
	for _, opset := range []int{13, 17, 23} {
		pb, err := export.Model(m, export.Options{Opset: opset})
		require.NoError(t, err)
		pb.MetadataProps = nil
		res, err := lift.Lift(pb)
		require.NoError(t, err, "opset %d", opset)
		assert.Contains(t, res.Config, "{name: mixtral, type: nn.moe, d: 8, d_hidden: 6, experts: 4, top_k: 2}")
		assert.Contains(t, res.Config, "{name: qwen2_moe, type: nn.moe, d: 8, d_hidden: 4, experts: 5, top_k: 2, renormalize: false, shared_d_hidden: 10}")
		want := runExport(t, pb, inputs(3))
		got, err := res.Model.Forward(nil, inputs(3)["x"])
		require.NoError(t, err)
		assertSameOutput(t, want, got)
	}
}
