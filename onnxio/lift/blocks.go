package lift

import (
	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/registry"
)

// block recognizes the layer, other than attention, that starts at node n
// among those whose recognizers are still here: an RMSNorm, from its Pow
// (blocks_modern.go). The others, from the residual Add to the MLP, are
// late patterns next to their layers (layers/*_lift.go). It returns nil,
// nil when n starts none.
func (a *analysis) block(n *node) (*region, *failure) {
	if n.GetOpType() == "Pow" {
		return a.rmsNorm(n)
	}
	return nil, nil
}

// staticSources lists the initializers and Constants a static value is
// computed from, itself included.
func (a *analysis) staticSources(v string) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(string)
	walk = func(v string) {
		if v == "" || seen[v] || a.g.IsData(v) {
			return
		}
		seen[v] = true
		n := a.g.Producer(v)
		if n == nil || n.GetOpType() == "Constant" {
			out = append(out, v)
			return
		}
		for _, in := range n.GetInput() {
			walk(in)
		}
	}
	walk(v)
	return out
}

// otherInput returns the input of a binary node that is not v.
func otherInput(n *node, v string) string {
	if n.GetInput()[0] == v {
		return n.GetInput()[1]
	}
	return n.GetInput()[0]
}

// reducesLastAxis checks a ReduceMean over the last axis with kept dims.
func (a *analysis) reducesLastAxis(n *node) bool {
	return match.ReducesLastAxis(patternGraph{a: a}, match.NewNode(n))
}

// hidden lists layer types the lift must act as if they were not
// registered: tests use it to see what a build without them reports.
var hidden = map[string]bool{}

// registered reports whether a layer type is available to lift into.
func registered(id string) bool {
	_, err := registry.Lookup(id)
	return err == nil && !hidden[id]
}
