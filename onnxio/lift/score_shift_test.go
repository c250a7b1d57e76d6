package lift_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/registry"
)

// TestLiftScoreShift lifts attention.sdpa with score_mod shift from its
// export, by structure (the Add of one number to every score read as the
// shift), at several opsets: the lifted model has the same config and
// weights and gives the original's outputs.
func TestLiftScoreShift(t *testing.T) {
	config := "# input: [2, 5, 8]\nname: shifted\nlayers:\n  - {name: attn, type: attention.sdpa, d: 8, num_heads: 2, causal: true, score_mod: {type: shift, by: -10000}}\n"
	want := "{name: attn, type: attention.sdpa, d: 8, num_heads: 2, qkv_bias: false, out_bias: true, causal: true, score_mod: {type: shift, by: -10000}}"
	for _, opset := range []int{13, 17} {
		t.Run(fmt.Sprintf("opset%d", opset), func(t *testing.T) { checkStructuralLift(t, config, want, opset) })
	}
}

// TestLiftStaticScoreShift lifts the export of testdata/export_score_shift.py:
// BERT's extended mask of an attention_mask of zeros, folded into a
// constant of -10000 added to every score (ONNX Runtime's
// fusion_mask_no_cast is such a graph). The lifted attention adds it too
// (score_mod shift) and gives PyTorch's output within 1e-5 relative, 1e-6
// absolute; without the shift, whose rounding is the graph's, it does not.
func TestLiftStaticScoreShift(t *testing.T) {
	dir := "testdata/score_shift_static"
	src, err := onnxio.ReadModel(filepath.Join(dir, "model.onnx"))
	require.NoError(t, err)
	res, err := lift.Lift(src)
	require.NoError(t, err, "%v", err)
	shift := ", score_mod: {type: shift, by: -10000}"
	require.Contains(t, res.Config, "{name: attn, type: attention.sdpa, d: 16, num_heads: 2, qkv_bias: true, out_bias: true, causal: false"+shift+"}")
	checkDataSets(t, dir, res)

	unshifted, err := models.Parse([]byte(strings.Replace(res.Config, shift, "", 1)), "unshifted.yaml")
	require.NoError(t, err)
	require.NoError(t, unshifted.LoadStateDict(res.StateDict))
	in, want, err := onnxio.ReadDataSetArrays(filepath.Join(dir, "test_data_set_0"))
	require.NoError(t, err)
	x, err := in[0].Dense()
	require.NoError(t, err)
	y, err := unshifted.Forward(&registry.Run{Context: context.Background()}, x)
	require.NoError(t, err)
	wd, err := want[0].Dense()
	require.NoError(t, err)
	w, g := wd.Data().([]float32), y.Data().([]float32)
	off := 0
	for i := range w {
		if math.Abs(float64(w[i]-g[i])) > 1e-6+1e-5*math.Abs(float64(w[i])) {
			off++
		}
	}
	assert.Positive(t, off, "without the shift the output should differ from PyTorch's beyond the tolerance")
}
