package lift

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Graphs that do not run at the probe sizes. PyTorch 2.x's TorchScript
// exporter traces nn.MultiheadAttention's lengths as constants: a
// Reshape's target holds the example's sequence length, so the graph runs
// only on inputs of that length although it declares the axis symbolic
// (ONNX Runtime fails it at any other). When neither probe runs, the graph
// is probed at sizes it runs at, searched among the numbers its Reshape
// targets are built from; it is probed once, since a frozen graph runs at
// no second size. (Sizes that depend on each other, past + sequence =
// total, are better found by reading the graph; this search is the last
// resort.)

// maxFrozenProbes bounds the evaluations of the graph the search tries.
const maxFrozenProbes = 32

// frozenProbe searches for sizes of the symbolic dimensions at which the
// graph evaluates, trying the numbers its Reshape targets are built from,
// fewest changed dimensions first. It returns the probe and a note naming
// the sizes, or the error of the first probe when none runs.
func frozenProbe(g *graph, first int, firstErr error) (*probe, string, error) {
	names := symbolic(g)
	sizes := reshapeConstants(g)
	if len(names) == 0 || len(sizes) == 0 {
		return nil, "", firstErr
	}
	tried := 0
	for _, dims := range sizeChoices(names, first, sizes) {
		if tried == maxFrozenProbes {
			break
		}
		tried++
		p, err := probeAt(g, dims)
		if err != nil {
			return nil, "", err
		}
		if p.evaluate() == nil {
			return p, fmt.Sprintf("the graph does not run at the probe sizes; it runs at %s (found among the sizes its Reshape targets are built from, as an exporter freezes an example's lengths) and was probed there alone", describeDims(names, dims)), nil
		}
	}
	return nil, "", firstErr
}

// sizeChoices lists assignments of the symbolic dimensions: each the
// default size (first, first+1, ... as the probes set them) or one of
// sizes, those that change fewer dimensions first. It lists none when
// there would be more than maxSizeChoices.
func sizeChoices(names []string, first int, sizes []int) []map[string]int {
	total := 1
	for range names {
		if total *= len(sizes) + 1; total > maxSizeChoices {
			return nil
		}
	}
	out := []map[string]int{{}}
	for i, name := range names {
		choices := []int{first + i}
		for _, s := range sizes {
			if s != first+i {
				choices = append(choices, s)
			}
		}
		var next []map[string]int
		for _, dims := range out {
			for _, s := range choices {
				d := maps.Clone(dims)
				d[name] = s
				next = append(next, d)
			}
		}
		out = next
	}
	changed := func(dims map[string]int) int {
		n := 0
		for i, name := range names {
			if dims[name] != first+i {
				n++
			}
		}
		return n
	}
	sort.SliceStable(out, func(i, j int) bool { return changed(out[i]) < changed(out[j]) })
	return out
}

// maxSizeChoices bounds the assignments sizeChoices lists.
const maxSizeChoices = 1 << 12

// reshapeConstants lists, sorted, the sizes above 1 held by the integer
// constants (initializers and Constant nodes of at most 4 elements) that a
// Reshape's target is computed from.
func reshapeConstants(g *graph) []int {
	seen := map[string]bool{}
	found := map[int]bool{}
	var walk func(v string)
	walk = func(v string) {
		if v == "" || seen[v] {
			return
		}
		seen[v] = true
		if t, ok := g.Inits[v]; ok {
			addSizes(found, t)
			return
		}
		n := g.Producer(v)
		if n == nil {
			return
		}
		if n.GetOpType() == "Constant" {
			if a := n.Attr("value"); a != nil && a.GetT() != nil {
				addSizes(found, a.GetT())
			}
			return
		}
		for _, in := range n.GetInput() {
			walk(in)
		}
	}
	for _, n := range g.Nodes {
		if n.GetOpType() == "Reshape" && len(n.GetInput()) == 2 {
			walk(n.GetInput()[1])
		}
	}
	var sizes []int
	for s := range found {
		sizes = append(sizes, s)
	}
	sort.Ints(sizes)
	return sizes
}

// addSizes adds the values above 1 of a small integer tensor to found.
func addSizes(found map[int]bool, t *onnxpb.TensorProto) {
	d, err := onnxio.TensorToDense(t)
	if err != nil || d.Shape().TotalSize() > 4 {
		return
	}
	if d.Dtype() != tensor.Int64 {
		return
	}
	values, err := match.Floats(d)
	if err != nil {
		return
	}
	for _, x := range values {
		if x > 1 && x <= 1<<12 {
			found[int(x)] = true
		}
	}
}

// describeDims formats sizes as "batch=2, sequence=6".
func describeDims(names []string, dims map[string]int) string {
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s=%d", name, dims[name])
	}
	return strings.Join(parts, ", ")
}
