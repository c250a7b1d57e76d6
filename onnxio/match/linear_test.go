package match

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// toyLinearView is a toyView whose values are private unless named
// "shared*".
type toyLinearView struct{ toyView }

func (toyLinearView) Private(v string) bool { return v[0] != 's' }

func TestBiasAdd(t *testing.T) {
	g := toyLinearView{toy(
		&toyNode{"MatMul", []string{"x", "w"}, "xw"},
		&toyNode{"MatMul", []string{"x", "w2"}, "xw2"},
		&toyNode{"MatMul", []string{"x", "w3"}, "shared"},
		&toyNode{"Add", []string{"b", "xw"}, "y"},
		&toyNode{"Add", []string{"xw", "xw2"}, "y2"},
		&toyNode{"Add", []string{"shared", "b"}, "y3"},
		&toyNode{"Mul", []string{"xw", "b"}, "y4"},
	)}
	anyMatMul := func(*toyNode, int) bool { return true }
	mm, bias, ok := BiasAdd[*toyNode, string](g, g.toyView["y"], anyMatMul)
	assert.True(t, ok)
	assert.Equal(t, g.toyView["xw"], mm)
	assert.Equal(t, 0, bias, "Add(b, MatMul): the bias is input 0")

	mm, bias, ok = BiasAdd[*toyNode, string](g, g.toyView["y2"], anyMatMul)
	assert.True(t, ok)
	assert.Equal(t, g.toyView["xw"], mm, "the product at input 0 is tried first")
	assert.Equal(t, 1, bias)
	notFirst := func(mm *toyNode, _ int) bool { return mm != g.toyView["xw"] }
	mm, bias, ok = BiasAdd[*toyNode, string](g, g.toyView["y2"], notFirst)
	assert.True(t, ok)
	assert.Equal(t, g.toyView["xw2"], mm, "then the product at input 1")
	assert.Equal(t, 0, bias)

	_, _, ok = BiasAdd[*toyNode, string](g, g.toyView["y3"], anyMatMul)
	assert.False(t, ok, "a product others read too")
	_, _, ok = BiasAdd[*toyNode, string](g, g.toyView["y4"], anyMatMul)
	assert.False(t, ok, "not an Add")
}
