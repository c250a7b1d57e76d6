package lift

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"gorgonia.org/tensor"
)

// region is a part of the graph recognized as one attnrun layer: the data
// nodes it replaces, the values it reads and writes, and the layer's
// config fields and parameters.
type region struct {
	typ     string
	fields  []field
	inputs  []string // graph values the layer reads, in order
	output  string   // graph value the layer writes
	params  []param
	nodes   []*node
	weights []weightsOutput
	// kind names the layer in reports and is the fallback layer name.
	kind string
	// notes say what the lift assumed, for the printed summary.
	notes []string
	// before are layers the recognizer found with this one, which it
	// reads: the mask.padding of a keep mask. Several regions may carry
	// the same one; it is lifted once.
	before []*region
	// indexBound, when positive, says the layer reads its input as indices
	// below it (match.Layer.IndexBound).
	indexBound int
}

// field is one key of a layer's config, in the order it is printed.
type field struct {
	key   string
	value any
}

// param is one parameter of a lifted layer and where its numbers come from.
type param struct {
	name   string // within the layer: "W_query.weight"
	value  *tensor.Dense
	pieces []piece // the graph tensors its rows come from, in order
}

// piece is a block of rows of a parameter taken from one graph tensor.
type piece struct {
	value      string // the graph's (static) value it is read from
	transposed bool   // the graph holds it (in, out), the parameter (out, in)
	// lo and hi are the rows of the (transposed) tensor it takes: all of
	// them, or rows lo:hi only when split is set.
	lo, hi int
	split  bool
}

// weightsOutput is a graph output that carries a layer's attention weights.
type weightsOutput struct {
	output string
	mean   bool // averaged over heads, as nn.MultiheadAttention returns them
}

// failure is a part of the graph that looks like a layer but cannot be
// lifted, and why.
type failure struct {
	nodes  []*node
	reason string
}

func (f *failure) Error() string { return f.reason }

// fail builds a failure over the given nodes.
func fail(nodes []*node, format string, args ...any) *failure {
	return &failure{nodes: uniqueNodes(nodes), reason: fmt.Sprintf(format, args...)}
}

// uniqueNodes returns nodes without repeats, in graph order.
func uniqueNodes(nodes []*node) []*node {
	seen := map[*node]bool{}
	var out []*node
	for _, n := range nodes {
		if n != nil && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// checkContained verifies that no value computed inside the region is read
// outside it: a layer is a black box, and its intermediates do not exist
// once it is lifted.
func (a *analysis) checkContained(r *region) *failure {
	inside := map[*node]bool{}
	for _, n := range r.nodes {
		inside[n] = true
	}
	exposed := map[string]bool{r.output: true}
	for _, w := range r.weights {
		exposed[w.output] = true
	}
	for _, n := range r.nodes {
		for _, out := range n.GetOutput() {
			if exposed[out] || out == "" || a.cache.isPresent(out) {
				continue
			}
			if a.g.IsOutput(out) {
				return fail(r.nodes, "%s: its intermediate value %q is a graph output", r.kind, out)
			}
			for _, c := range a.readers(out) {
				if !inside[c] {
					return fail(r.nodes, "%s: its intermediate value %q is also read by node %s (%s) outside it",
						r.kind, out, c.Label(), c.GetOpType())
				}
			}
		}
	}
	return nil
}

// nameHint derives a layer name from the module path PyTorch writes into
// node names ("/attn/W_query/MatMul" -> "attn", "/mlp/mlp.0/MatMul" ->
// "mlp_0"). Names only label layers; nothing is recognized by them.
func nameHint(nodes []*node) string {
	var common []string
	for i, n := range nodes {
		parts := strings.Split(strings.Trim(n.GetName(), "/"), "/")
		if len(parts) < 2 || !strings.HasPrefix(n.GetName(), "/") {
			return ""
		}
		parts = parts[:len(parts)-1]
		if i == 0 {
			common = parts
			continue
		}
		k := 0
		for k < len(common) && k < len(parts) && common[k] == parts[k] {
			k++
		}
		common = common[:k]
	}
	if len(common) == 0 {
		return ""
	}
	return sanitize(common[len(common)-1])
}

// sanitize turns a string into a layer or input name: lowercase letters,
// digits and underscores, starting with a letter; "" when nothing is left.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := strings.Trim(b.String(), "_")
	if out == "" || out[0] < 'a' || out[0] > 'z' {
		return ""
	}
	return out
}

// equalShapes compares two shapes.
func equalShapes(a, b []int) bool { return slices.Equal(a, b) }
