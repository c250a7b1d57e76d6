package exec

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFusionsRunInOrder checks the registered passes: attention chains
// before the bias pairs their projections would otherwise form, products
// sharing an input once their biases are fused, Shape rewrites last; a pass registered twice panics.
func TestFusionsRunInOrder(t *testing.T) {
	var names []string
	for _, p := range fusions {
		names = append(names, p.name)
	}
	assert.Equal(t, []string{"attention", "bias", "shared input", "residual layernorm", "gelu", "shape of transpose", "shape of expand"}, names)
	assert.Panics(t, func() { registerFusion(fusion{name: "bias", order: 99, run: fuseBias}) })
	assert.Len(t, fusions, 7)
}
