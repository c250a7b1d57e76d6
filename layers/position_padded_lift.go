package layers

import (
	"slices"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// position.padded in ONNX graphs: Gather(table, positions) where the
// positions are computed from int64 token ids as PyTorch exports
// create_position_ids_from_input_ids,
//
//	mask = Cast(Not(Equal(ids, pad)))    positions = Cast(CumSum(mask) · mask) + pad
//
// with any Casts between; or from an int64 attention_mask as OPT's
// learned positions compute them,
//
//	positions = (CumSum(mask) · mask − 1)[:, past:] + offset
//
// (input: attention_mask, padding_idx offset − 1). The nodes are checked by op and by the padding
// id both ends share; the numbers by the lifter's run of the layer
// against the graph.

func init() {
	match.RegisterPattern(match.Pattern{Name: "position.padded", Op: "Gather", Match: liftPaddedPosition})
}

// paddedPositionOps are the ops the positions are computed with.
var paddedPositionOps = map[string]bool{"Equal": true, "Not": true, "Cast": true, "CumSum": true, "Mul": true, "Add": true}

// liftPaddedPosition lifts the Gather of a table's rows at padded positions.
func liftPaddedPosition(g match.Graph, gather *match.Node) (*match.Layer, error) {
	ins := gather.Inputs()
	if len(ins) != 2 || g.IsData(ins[0]) || !g.IsData(ins[1]) || gather.Int("axis", 0) != 0 {
		return nil, nil
	}
	add := g.Producer(ins[1])
	for add != nil && add.Op() == "Cast" {
		add = g.Producer(add.Inputs()[0])
	}
	if add == nil || add.Op() != "Add" {
		return nil, nil
	}
	pad, ok := staticOperand(g, add)
	if !ok {
		return nil, nil
	}
	var fromMask []match.Field
	ids, nodes, ok := paddedPositionChain(g, ins[1], pad)
	if !ok {
		if ids, nodes, pad, ok = maskPositionChain(g, ins[1]); !ok {
			return nil, nil
		}
		fromMask = []match.Field{{Key: "input", Value: "attention_mask"}}
	}
	table, err := g.Constant(ins[0])
	if err != nil || table.Dims() != 2 || pad < 0 || int(pad) >= table.Shape()[0] {
		return nil, nil
	}
	w, err := match.Float32(table)
	if err != nil {
		return nil, nil
	}
	if !g.Registered("position.padded") {
		return nil, match.Refuse([]*match.Node{gather}, "RoBERTa's positions: no layer type position.padded is registered in this build")
	}
	return &match.Layer{Type: "position.padded", Name: "position", Inputs: []string{ids}, Output: gather.Output(),
		Nodes: append(nodes, gather),
		Config: append([]match.Field{{Key: "num_embeddings", Value: table.Shape()[0]}, {Key: "embedding_dim", Value: table.Shape()[1]},
			{Key: "padding_idx", Value: int(pad)}}, fromMask...),
		Params: []match.Param{{Name: "weight", Value: w, From: ins[0]}}}, nil
}

// staticOperand returns the static scalar operand of a binary node.
func staticOperand(g match.Graph, n *match.Node) (float64, bool) {
	for _, in := range n.Inputs() {
		if in != "" && !g.IsData(in) {
			return g.Scalar(in)
		}
	}
	return 0, false
}

// paddedPositionChain walks back from the positions to the int64 graph
// input they are computed from, through the ops of paddedPositionOps
// alone, with one CumSum and an Equal to pad. It returns the input and
// the nodes.
func paddedPositionChain(g match.Graph, positions string, pad float64) (string, []*match.Node, bool) {
	input, nodes, ok := chainFromInput(g, positions, func(n *match.Node) ([]string, bool) {
		if !paddedPositionOps[n.Op()] {
			return nil, false
		}
		if n.Op() == "Equal" {
			if c, ok := staticOperand(g, n); !ok || c != pad {
				return nil, false
			}
		}
		return n.Inputs(), true
	})
	if !ok {
		return "", nil, false
	}
	if countOps(nodes, "Equal") == 0 || countOps(nodes, "CumSum") != 1 {
		return "", nil, false
	}
	if t, err := g.ValueAt(0, input); err != nil || t.Dtype() != tensor.Int64 {
		return "", nil, false
	}
	return input, nodes, true
}

// maskPositionOps are the ops OPT's positions are computed with from the
// attention_mask.
var maskPositionOps = map[string]bool{"Cast": true, "CumSum": true, "Mul": true, "Sub": true, "Add": true, "Slice": true}

// maskPositionChain walks back from the positions to the int64 graph input
// they are computed from, through the ops of maskPositionOps alone, with
// one CumSum and Slices that start at 0 (the past's length, none in the
// graph the lifter reads). It returns the input, the nodes and the
// position of padding, read from the values at the first probe: a token
// sits one past it.
func maskPositionChain(g match.Graph, positions string) (string, []*match.Node, float64, bool) {
	input, nodes, ok := chainFromInput(g, positions, func(n *match.Node) ([]string, bool) {
		if !maskPositionOps[n.Op()] {
			return nil, false
		}
		ins := n.Inputs()
		if n.Op() != "Slice" {
			return ins, true
		}
		for i := range g.Probes() {
			if len(ins) < 2 || !sliceStartsAtZero(g, i, ins[1]) {
				return nil, false
			}
		}
		return ins[:1], true
	})
	if !ok {
		return "", nil, 0, false
	}
	mask, err := g.ValueAt(0, input)
	if err != nil || mask.Dtype() != tensor.Int64 || countOps(nodes, "CumSum") != 1 {
		return "", nil, 0, false
	}
	pos, err := g.ValueAt(0, positions)
	if err != nil {
		return "", nil, 0, false
	}
	m, p := mask.Data().([]int64), pos.Data().([]int64)
	if len(m) == 0 || len(p) == 0 {
		return "", nil, 0, false
	}
	pad := float64(p[0])
	if m[0] != 0 {
		pad--
	}
	return input, nodes, pad, true
}

// sliceStartsAtZero reports whether a Slice's starts hold only 0 at probe i.
func sliceStartsAtZero(g match.Graph, i int, starts string) bool {
	t, err := g.ValueAt(i, starts)
	if err != nil {
		return false
	}
	v, ok := t.Data().([]int64)
	return ok && !slices.ContainsFunc(v, func(s int64) bool { return s != 0 })
}

// chainFromInput walks back from v through the nodes step accepts to the
// one graph input they are computed from (static values aside); step
// returns which of a node's inputs to follow, false to refuse the node.
// It returns the input and the nodes.
func chainFromInput(g match.Graph, v string, step func(n *match.Node) ([]string, bool)) (string, []*match.Node, bool) {
	var nodes []*match.Node
	var inputs []string
	seen := map[string]bool{}
	var walk func(v string) bool
	walk = func(v string) bool {
		if seen[v] || !g.IsData(v) {
			return true
		}
		seen[v] = true
		n := g.Producer(v)
		if n == nil {
			inputs = append(inputs, v)
			return true
		}
		follow, ok := step(n)
		if !ok {
			return false
		}
		nodes = append(nodes, n)
		for _, in := range follow {
			if !walk(in) {
				return false
			}
		}
		return true
	}
	if !walk(v) || len(inputs) != 1 {
		return "", nil, false
	}
	return inputs[0], nodes, true
}

// countOps is how many of nodes run op.
func countOps(nodes []*match.Node, op string) int {
	n := 0
	for _, node := range nodes {
		if node.Op() == op {
			n++
		}
	}
	return n
}
