package lift

import (
	"fmt"
	"strings"

	"github.com/attnrun/attnrun/onnxio"
	ir "github.com/attnrun/attnrun/onnxio/graph"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// node is a graph node with its position in topological order.
type node = ir.Node

// graph is a model's main graph as package onnxio/graph indexes it, with
// the limits of the executor's runs of it (probe.go).
type graph struct {
	*ir.Graph
	limits execLimits
	// sums tie symbolic input dimensions to others (probe_dims.go).
	sums []dimSum
	// known are ties a recognizer learned from a first reading (a keep
	// mask as long as the keys, see tiedKeys), which hold before any
	// found by search.
	known []dimSum
}

// newGraph indexes m's graph. It refuses graphs the lifter cannot read:
// no graph, an input with an empty dimension, nodes out of topological
// order, values written twice.
func newGraph(m *onnxpb.ModelProto) (*graph, error) {
	if m.GetGraph() != nil && onnxio.OpsetVersion(m, "") != 0 {
		for _, vi := range m.GetGraph().GetInput() {
			if err := checkInputDims(vi); err != nil && !isInitializer(m, vi.GetName()) {
				return nil, err
			}
		}
	}
	g, err := ir.New(m)
	if err != nil {
		return nil, err
	}
	return &graph{Graph: g}, nil
}

// isInitializer reports whether m's graph has an initializer named name.
func isInitializer(m *onnxpb.ModelProto, name string) bool {
	for _, t := range m.GetGraph().GetInitializer() {
		if t.GetName() == name {
			return true
		}
	}
	return false
}

// checkInputDims refuses a graph input with a fixed dimension below 1: the
// lifter reads a graph by running it on inputs of the declared shapes (see
// probe), and an empty input computes nothing to read (nor can an attnrun
// layer take one).
func checkInputDims(vi *onnxpb.ValueInfoProto) error {
	for i, d := range onnxio.Dims(vi) {
		if d.Known && d.Value < 1 {
			return fmt.Errorf("input %q declares shape %s: dimension %d has size %d, want at least 1 (the lifter runs the graph on inputs of the declared shape)",
				vi.GetName(), onnxio.FormatDims(onnxio.Dims(vi)), i, d.Value)
		}
	}
	return nil
}

// quoted formats names for messages: "a", "b".
func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// inputType is the element type a graph input declares (0 for a name that
// is no graph input).
func (g *graph) inputType(name string) onnxio.DataType {
	for _, vi := range g.Inputs {
		if vi.GetName() == name {
			return onnxio.ElemType(vi)
		}
	}
	return 0
}
