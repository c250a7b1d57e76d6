package graph

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInOrderSortsAndRenames checks the repairs of a graph written out of
// order with a value name written twice: the readers see the last write
// (as ONNX Runtime binds them), the earlier write gets a fresh name, and
// the nodes come in dependency order, free nodes in file order.
func TestInOrderSortsAndRenames(t *testing.T) {
	m := model(
		node("Add", []string{"t", "w"}, "y"),  // reads t before it is written
		node("Neg", []string{"x"}, "t"),       // the first write of t: nobody reads it
		node("Relu", []string{"x"}, "unused"), // free, keeps its place among the ready
		node("Abs", []string{"x"}, "t"),       // the write Add reads
	)
	out, notes := InOrder(m)
	require.Len(t, notes, 2)
	assert.Contains(t, notes[0], `1 value name(s) are written by more than one node (the first "t")`)
	assert.Contains(t, notes[1], "not in topological order")
	var got [][]string
	for _, n := range out.GetGraph().GetNode() {
		got = append(got, append([]string{n.GetOpType()}, n.GetOutput()...))
	}
	assert.Equal(t, [][]string{{"Neg", "t~1"}, {"Relu", "unused"}, {"Abs", "t"}, {"Add", "y"}}, got)
	assert.Equal(t, "t", m.GetGraph().GetNode()[1].GetOutput()[0], "the caller's model is not modified")
	g, err := New(out)
	require.NoError(t, err)
	assert.Equal(t, "Abs", g.Producer("t").GetOpType())

	same, notes := InOrder(out)
	assert.Same(t, out, same, "a graph in order is returned as is")
	assert.Empty(t, notes)
}
