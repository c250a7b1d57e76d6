package lift_test

import (
	"fmt"
	"testing"
)

// TestLiftScoreShift lifts attention.sdpa with score_mod shift from its
// export, by structure (the Add of one number to every score read as the
// shift), at several opsets: the lifted model has the same config and
// weights and gives the original's outputs. ONNX Runtime's own numbers for
// a shift (an attention_mask of zeros folded into the graph) are checked
// by TestRealWorldGraphsLift on fusion_mask_no_cast.
func TestLiftScoreShift(t *testing.T) {
	config := "# input: [2, 5, 8]\nname: shifted\nlayers:\n  - {name: attn, type: attention.sdpa, d: 8, num_heads: 2, causal: true, score_mod: {type: shift, by: -10000}}\n"
	want := "{name: attn, type: attention.sdpa, d: 8, num_heads: 2, qkv_bias: false, out_bias: true, causal: true, score_mod: {type: shift, by: -10000}}"
	for _, opset := range []int{13, 17} {
		t.Run(fmt.Sprintf("opset%d", opset), func(t *testing.T) { checkStructuralLift(t, config, want, opset) })
	}
}
