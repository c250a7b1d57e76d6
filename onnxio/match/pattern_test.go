package match

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"gorgonia.org/tensor"
)

// TestRegisteredOrder checks the order patterns are offered a node in:
// by priority, then by name; Patterns lists the names sorted.
func TestRegisteredOrder(t *testing.T) {
	none := func(Graph, *Node) (*Layer, error) { return nil, nil }
	RegisterPattern(Pattern{Name: "test.b", Op: "Relu", Match: none})
	RegisterPattern(Pattern{Name: "test.a", Op: "Relu", Match: none})
	RegisterPattern(Pattern{Name: "test.z", Op: "Relu", Priority: -1, Match: none})
	var order []string
	for _, p := range Registered() {
		if p.Op == "Relu" {
			order = append(order, p.Name)
		}
	}
	assert.Equal(t, []string{"test.z", "test.a", "test.b"}, order)
	assert.True(t, slices.IsSorted(Patterns()))
	assert.Subset(t, Patterns(), []string{"test.a", "test.b", "test.z"})
	assert.PanicsWithValue(t, `match: RegisterPattern called twice for "test.a"`, func() {
		RegisterPattern(Pattern{Name: "test.a", Op: "Relu", Match: none})
	})
}

func TestRefuse(t *testing.T) {
	var err error = Refuse(nil, "axis %d of %d", 1, 3)
	var r *Refusal
	assert.True(t, errors.As(err, &r))
	assert.Equal(t, "axis 1 of 3", err.Error())
}

func TestLinearParams(t *testing.T) {
	w := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(make([]float32, 6)))
	b := tensor.New(tensor.WithShape(2), tensor.WithBacking(make([]float32, 2)))
	l := &Linear{Weight: w, Bias: b, WeightFrom: "onnx::MatMul_7", BiasFrom: "fc.bias", Transposed: true}
	assert.Equal(t, []Param{{Name: "fc1.weight", Value: w, From: "onnx::MatMul_7", Transposed: true}, {Name: "fc1.bias", Value: b, From: "fc.bias"}}, l.Params("fc1"))
	names := []string{}
	for _, p := range l.Params("") {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"weight", "bias"}, names)
}

func TestFloatsAndTokens(t *testing.T) {
	f, err := Floats(tensor.New(tensor.WithShape(3), tensor.WithBacking([]bool{true, false, true})))
	assert.NoError(t, err)
	assert.Equal(t, []float64{1, 0, 1}, f)
	f, err = Floats(tensor.New(tensor.WithShape(2), tensor.WithBacking([]int64{-2, 7})))
	assert.NoError(t, err)
	assert.Equal(t, []float64{-2, 7}, f)
	c, err := Float32(tensor.New(tensor.WithShape(2), tensor.WithBacking([]float64{0.5, 3})))
	assert.NoError(t, err)
	assert.Equal(t, []float32{0.5, 3}, c.Data())
	f, err = Floats(tensor.New(tensor.WithShape(2), tensor.WithBacking([]uint8{1, 255})))
	assert.NoError(t, err) // quantized inputs (attn_past_state_u8s8)
	assert.Equal(t, []float64{1, 255}, f)
	_, err = Floats(tensor.New(tensor.WithShape(1), tensor.WithBacking([]uint16{1})))
	assert.Error(t, err)

	b, tt, d, ok := Tokens([]int{2, 5, 8})
	assert.Equal(t, []int{2, 5, 8}, []int{b, tt, d})
	assert.True(t, ok)
	b, tt, d, ok = Tokens([]int{5, 8})
	assert.Equal(t, []int{1, 5, 8}, []int{b, tt, d})
	assert.True(t, ok)
	_, _, _, ok = Tokens([]int{8})
	assert.False(t, ok)
}

func TestRegisterAttention(t *testing.T) {
	none := func(*Attention) (*Layer, error) { return nil, nil }
	RegisterAttention(AttentionBuilder{Name: "test.late", Priority: 9, Build: none})
	RegisterAttention(AttentionBuilder{Name: "test.early", Priority: -9, Build: none})
	bs := AttentionBuilders()
	assert.Equal(t, "test.early", bs[0].Name)
	assert.Equal(t, "test.late", bs[len(bs)-1].Name)
	assert.Panics(t, func() { RegisterAttention(AttentionBuilder{Name: "test.late", Build: none}) })
	assert.Panics(t, func() { RegisterAttention(AttentionBuilder{Name: "test.nil"}) })
}

func TestRegisterMerge(t *testing.T) {
	none := func(*Layer, []*Layer) *Layer { return nil }
	RegisterMerge(Merge{Name: "test.merge", Merge: none})
	assert.True(t, slices.ContainsFunc(Merges(), func(m Merge) bool { return m.Name == "test.merge" }))
	assert.Panics(t, func() { RegisterMerge(Merge{Name: "test.merge", Merge: none}) })
	assert.Panics(t, func() { RegisterMerge(Merge{Name: "test.nil"}) })
}
