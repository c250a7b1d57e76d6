package layers_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// From opset 25 on, attention.sdpa's window is the Attention op's
// left_window_size (window − 1) when the layer's causal frontier is the
// op's is_causal, and the attn_mask no longer carries it (a window alone
// leaves no mask); a bottom-right cross-attention keeps it in the mask.
// Before opset 25 no export has the attribute. TestModernExportsMatchForward
// runs every one of these exports against Forward.
func TestSDPAWindowExportsAsAttribute(t *testing.T) {
	for _, c := range []struct {
		config string
		left   int64 // left_window_size at opset 25, -1 for none
		inputs int   // of the Attention node at opset 25
	}{
		{"sdpa_window", 2, 3},
		{"multi/sdpa_everything", 3, 4}, // the key padding mask remains
		{"multi/sdpa_alibi_additive", 2, 4},
		{"multi/sdpa_cross_window_top_left", 1, 3},
		{"multi/sdpa_cross_window_bottom_right", -1, 4},
	} {
		m := loadModernConfig(t, filepath.Join(exportConfigs, c.config+".yaml")).model
		for _, opset := range []int{23, 24, 25} {
			var found int
			for _, n := range exportModel(t, m, opset).GetGraph().GetNode() {
				if n.GetOpType() != "Attention" {
					continue
				}
				found++
				left := int64(-1)
				for _, a := range n.GetAttribute() {
					switch a.GetName() {
					case "left_window_size":
						left = a.GetI()
					case "right_window_size":
						t.Errorf("%s opset %d: right_window_size %d written; is_causal bounds the right side", c.config, opset, a.GetI())
					}
				}
				if opset < 25 {
					assert.Equal(t, int64(-1), left, "%s opset %d", c.config, opset)
					continue
				}
				assert.Equal(t, c.left, left, "%s opset %d: left_window_size", c.config, opset)
				assert.Len(t, n.GetInput(), c.inputs, "%s opset %d: inputs %v", c.config, opset, n.GetInput())
			}
			require.Equal(t, 1, found, "%s opset %d: Attention nodes", c.config, opset)
		}
	}
}
