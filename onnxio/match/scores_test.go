package match

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// toyNode is a node of a toy graph: values are names.
type toyNode struct {
	op  string
	in  []string
	out string
}

// toyView is a graph of toyNodes; it follows every value and lets any
// input not named "const*" carry the scores.
type toyView map[string]*toyNode

func (g toyView) Producer(v string) (*toyNode, bool) { n, ok := g[v]; return n, ok }
func (toyView) Op(n *toyNode) string                 { return n.op }
func (toyView) Inputs(n *toyNode) []string           { return n.in }
func (toyView) Follows(string, *toyNode) bool        { return true }
func (toyView) Carries(n *toyNode, k int) bool       { return n.in[k][0] != 'c' }

func toy(nodes ...*toyNode) toyView {
	g := toyView{}
	for _, n := range nodes {
		g[n.out] = n
	}
	return g
}

func TestWalkScoresReadsEveryStepKind(t *testing.T) {
	g := toy(
		&toyNode{"MatMul", []string{"q", "kt"}, "s"},
		&toyNode{"Div", []string{"s", "c_scale"}, "s1"},
		&toyNode{"Where", []string{"c_mask", "c_fill", "s1"}, "s2"},
		&toyNode{"Add", []string{"c_bias", "s2"}, "s3"},
		&toyNode{"Identity", []string{"s3"}, "s4"},
		&toyNode{"Mul", []string{"c_two", "s4"}, "s5"},
		&toyNode{"Where", []string{"c_keep", "s5", "c_fill"}, "s6"},
	)
	c := WalkScores[*toyNode, string](g, "s6", Rules{Copies: true})
	require.Equal(t, AtProduct, c.Stop)
	assert.Equal(t, g["s"], c.Product)
	require.Len(t, c.Steps, 6)
	assert.Len(t, c.Nodes, 7)
	want := []Step[*toyNode]{
		{Node: g["s6"], Kind: Where, Scores: 1, Arg: 0, Fill: 2, Keep: true},
		{Node: g["s5"], Kind: Scale, Scores: 1, Arg: 0, Fill: -1},
		{Node: g["s4"], Kind: Copy, Scores: 0, Arg: -1, Fill: -1},
		{Node: g["s3"], Kind: Add, Scores: 1, Arg: 0, Fill: -1},
		{Node: g["s2"], Kind: Where, Scores: 2, Arg: 0, Fill: 1},
		{Node: g["s1"], Kind: Scale, Scores: 0, Arg: 1, Fill: -1, OnDiv: true},
	}
	assert.Equal(t, want, c.Steps)
}

func TestWalkScoresStops(t *testing.T) {
	g := toy(
		&toyNode{"MatMul", []string{"q", "kt"}, "s"},
		&toyNode{"Identity", []string{"s"}, "s1"},
		&toyNode{"Div", []string{"c_one", "s"}, "r"}, // the scores divide a constant: no step
		&toyNode{"Relu", []string{"s"}, "relu"},
		&toyNode{"Mul", []string{"s", "c_two"}, "m1"},
		&toyNode{"Mul", []string{"m1", "c_two"}, "m2"},
		&toyNode{"Mul", []string{"m2", "c_two"}, "m3"},
	)
	c := WalkScores[*toyNode, string](g, "s1", Rules{})
	assert.Equal(t, AtOther, c.Stop, "Identity is no step without Copies")
	assert.Equal(t, g["s1"], c.At)
	c = WalkScores[*toyNode, string](g, "r", Rules{})
	assert.Equal(t, NoScores, c.Stop)
	c = WalkScores[*toyNode, string](g, "relu", Rules{})
	assert.Equal(t, AtOther, c.Stop)
	c = WalkScores[*toyNode, string](g, "q", Rules{})
	assert.Equal(t, AtSource, c.Stop)
	assert.Equal(t, "q", c.Value)
	c = WalkScores[*toyNode, string](g, "m3", Rules{MaxSteps: 2})
	assert.Equal(t, TooLong, c.Stop)
	assert.Equal(t, g["m1"], c.At)
	c = WalkScores[*toyNode, string](g, "m3", Rules{MaxSteps: 3})
	assert.Equal(t, AtProduct, c.Stop)
	assert.Len(t, c.Steps, 3)
}
