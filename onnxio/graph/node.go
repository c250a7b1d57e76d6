package graph

import (
	"fmt"
	"slices"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Node is a graph node with its position in the graph's node list.
type Node struct {
	*onnxpb.NodeProto
	// Index is the node's position in the graph (topological order).
	Index int
}

// Label names a node in reports: its name, or its position and op when
// the exporter left it unnamed ("#3 (MatMul)").
func (n *Node) Label() string {
	if n.GetName() != "" {
		return n.GetName()
	}
	return fmt.Sprintf("#%d (%s)", n.Index, n.GetOpType())
}

// Attr returns the node's attribute by name, or nil.
func (n *Node) Attr(name string) *onnxpb.AttributeProto {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a
		}
	}
	return nil
}

// Int returns an integer attribute, or def when the node does not have it.
func (n *Node) Int(name string, def int64) int64 {
	if a := n.Attr(name); a != nil {
		return a.GetI()
	}
	return def
}

// Float returns a float attribute, or def when the node does not have it.
func (n *Node) Float(name string, def float32) float32 {
	if a := n.Attr(name); a != nil {
		return a.GetF()
	}
	return def
}

// StringAttr returns a string attribute (Gelu's approximate), or def when the
// node does not have it.
func (n *Node) StringAttr(name, def string) string {
	if a := n.Attr(name); a != nil {
		return string(a.GetS())
	}
	return def
}

// Ints returns an integer-list attribute (Transpose's perm), or nil.
func (n *Node) Ints(name string) []int64 {
	if a := n.Attr(name); a != nil {
		return slices.Clone(a.GetInts())
	}
	return nil
}
