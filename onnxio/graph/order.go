package graph

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// InOrder returns m with its main graph read as ONNX Runtime reads it:
// a value name written by several nodes names the last writer's value (the
// earlier writes are renamed "NAME~K", which nothing reads), and the nodes
// run in dependency order (Kahn's algorithm, keeping the file's order
// where it is free to). It returns m itself when the graph already is in
// that form, and otherwise a new model sharing m's initializers and
// unchanged nodes, with one note per repair for the user. m is not
// modified. A node input that no node, graph input or initializer
// provides, or a cycle, is left for New to report.
func InOrder(m *onnxpb.ModelProto) (*onnxpb.ModelProto, []string) {
	gp := m.GetGraph()
	if gp == nil {
		return m, nil
	}
	nodes, notes := renameRewrites(gp)
	order, moved := dependencyOrder(gp, nodes)
	if moved != "" {
		notes = append(notes, moved)
	}
	if len(notes) == 0 {
		return m, nil
	}
	return WithNodes(m, order, nil), notes
}

// renameRewrites gives every write of a value name but the last a fresh
// name, copying the nodes it changes.
func renameRewrites(gp *onnxpb.GraphProto) ([]*onnxpb.NodeProto, []string) {
	last := map[string]int{}
	for i, n := range gp.GetNode() {
		for _, out := range n.GetOutput() {
			if out != "" {
				last[out] = i
			}
		}
	}
	nodes := slices.Clone(gp.GetNode())
	count := 0
	first := ""
	for i, n := range nodes {
		var renamed *onnxpb.NodeProto
		for k, out := range n.GetOutput() {
			if out == "" || last[out] == i {
				continue
			}
			if renamed == nil {
				renamed = proto.Clone(n).(*onnxpb.NodeProto)
			}
			renamed.Output[k] = fmt.Sprintf("%s~%d", out, i)
			count++
			if first == "" {
				first = out
			}
		}
		if renamed != nil {
			nodes[i] = renamed
		}
	}
	if count == 0 {
		return nodes, nil
	}
	return nodes, []string{fmt.Sprintf("%d value name(s) are written by more than one node (the first %q); the last writer's value is the one read, as in ONNX Runtime", count, first)}
}

// dependencyOrder sorts nodes so that each comes after the writers of its
// inputs, and says so when that moved a node ("" when it did not). Nodes
// that wait on a value nobody writes keep their place at the end.
func dependencyOrder(gp *onnxpb.GraphProto, nodes []*onnxpb.NodeProto) ([]*onnxpb.NodeProto, string) {
	writer := map[string]int{}
	for i, n := range nodes {
		for _, out := range n.GetOutput() {
			if out != "" {
				writer[out] = i
			}
		}
	}
	waiting := make([]int, len(nodes))
	readers := map[int][]int{}
	var ready []int
	for i, n := range nodes {
		for _, in := range n.GetInput() {
			if w, ok := writer[in]; ok && in != "" {
				waiting[i]++
				readers[w] = append(readers[w], i)
			}
		}
		if waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	order := make([]*onnxpb.NodeProto, 0, len(nodes))
	placed := make([]bool, len(nodes))
	for len(ready) > 0 {
		slices.Sort(ready)
		i := ready[0]
		ready = ready[1:]
		order = append(order, nodes[i])
		placed[i] = true
		for _, r := range readers[i] {
			if waiting[r]--; waiting[r] == 0 {
				ready = append(ready, r)
			}
		}
	}
	for i, n := range nodes { // a cycle: New names it
		if !placed[i] {
			order = append(order, n)
		}
	}
	for i, n := range order {
		if n != nodes[i] {
			return order, fmt.Sprintf("the nodes are not in topological order (node %s is not at position %d); they were read in dependency order, as ONNX Runtime runs them", label(nodes[i], i), i)
		}
	}
	return order, ""
}

// label names a NodeProto at position i as Node.Label does.
func label(n *onnxpb.NodeProto, i int) string {
	return (&Node{NodeProto: n, Index: i}).Label()
}
