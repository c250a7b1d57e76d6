package lift_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// qk_norm is lifted from the Attention op's export by structure: the
// per-head RMSNorm of the projections becomes qk_norm with its epsilon,
// and its weights q_norm.weight and k_norm.weight come from the graph's.
func TestLiftQKNorm(t *testing.T) {
	for _, opset := range []int{23, 24} {
		m, inputs := roundTripModel(t, "sdpa_qk_norm")
		pb, err := export.Model(m, export.Options{Opset: opset})
		require.NoError(t, err)
		pb.MetadataProps = nil
		res, err := lift.Lift(pb)
		require.NoError(t, err)
		assert.Contains(t, res.Config, "qk_norm: rms, qk_norm_eps: 1e-05", res.Config)
		var mapped []string
		for _, mp := range res.Mapping {
			mapped = append(mapped, mp.Initializer+" -> "+mp.Param)
		}
		assert.Contains(t, mapped, "attn.q_norm.weight -> attn.q_norm.weight")
		assert.Contains(t, mapped, "attn.k_norm.weight -> attn.k_norm.weight")
		want := runExport(t, pb, inputs(3))
		got, err := res.Model.Forward(nil, inputs(3)["x"])
		require.NoError(t, err)
		assertSameOutput(t, want, got)
	}
}

// Sinks and score modifications are rebuilt exactly from the metadata of
// the files attnrun wrote, FlexAttention exports included. Without the
// metadata, the standard-op exports lift by structure
// (TestLiftDecomposedSDPA checks their fields); the FlexAttention op does
// not.
func TestLiftSinksAndScoreMods(t *testing.T) {
	for _, config := range []string{"sdpa_sinks", "sdpa_score_mod", "multi/sdpa_sinks_padding", "multi/sdpa_score_mod_cross"} {
		for _, opts := range []export.Options{{Opset: 17}, {Opset: 23}, {Opset: 17, Preview: true}} {
			t.Run(fmt.Sprintf("%s/opset%d/preview=%v", config, opts.Opset, opts.Preview), func(t *testing.T) {
				m, inputs := roundTripModel(t, config)
				pb, err := export.Model(m, opts)
				require.NoError(t, err)
				res, err := lift.Lift(pb)
				require.NoError(t, err)
				require.True(t, res.Attnrun)
				for seed := range uint64(2) {
					feeds := inputs(seed)
					want := runExport(t, pb, feeds)
					var xs []*tensor.Dense
					for _, in := range m.Config().Inputs {
						xs = append(xs, feeds[in])
					}
					got, err := res.Model.Forward(nil, xs...)
					require.NoError(t, err)
					assertSameOutput(t, want, got)
				}

				stripped := proto.Clone(pb).(*onnxpb.ModelProto)
				stripped.MetadataProps = nil
				_, err = lift.Lift(stripped)
				if !opts.Preview {
					require.NoError(t, err)
					return
				}
				require.Error(t, err)
			})
		}
	}
}
