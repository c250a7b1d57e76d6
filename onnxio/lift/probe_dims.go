package lift

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/attnrun/attnrun/onnxio"
)

// A dimSum ties a symbolic dimension of the graph's inputs to the sum of
// others: a decoder with a KV cache takes an attention_mask over
// total_sequence = past_sequence + sequence keys, and runs on no other
// sizes. Probes, which give every symbolic dimension a size of its own,
// must honour such ties, or the graph cannot be evaluated at all.
type dimSum struct {
	dim   string   // the dimension the sum sets
	terms []string // the dimensions added, each free (set by no sum)
}

// String writes the tie as the exporters write a sum: "a + b".
func (s dimSum) String() string { return s.dim + " = " + strings.Join(s.terms, " + ") }

// maxRelationEvals bounds the evaluations of the graph that the search
// for ties between dimensions makes (each on inputs of a few elements).
const maxRelationEvals = 48

// findDimSums finds the ties among the graph's symbolic input dimensions
// under which it evaluates at the first probe size, and records them on
// g for every probe. A graph that evaluates as it is has none. Otherwise
// the candidates are, in order: the sums the graph itself declares for
// its outputs ("past_sequence + sequence", as the dynamo exporter writes
// the present cache's length), then any dimension equal to another, then
// the sum of two others. A candidate is kept when the graph evaluates
// under it, at the first size and the next, and its outputs have the
// sizes they declare (a mask longer than the keys may evaluate too); one
// tie is tried before two. It returns the error of the
// graph without ties when no candidate makes it evaluate.
func findDimSums(g *graph, first int) error {
	g.sums = slices.Clone(g.known)
	err := consistentProbe(g, first)
	if err == nil && consistentAt(g, first, sizedProbe) == nil {
		return nil
	}
	// A graph that evaluates only with some dimensions at 1 (OPT's
	// positions, sliced from a mask over past and new tokens) may evaluate
	// at full sizes under a tie: one is looked for, the 1s kept otherwise.
	evaluates := err == nil
	dims := symbolic(g)
	cands := candidateSums(g, dims)
	evals := 0
	try := func(sums []dimSum) bool {
		if evals >= maxRelationEvals {
			return false
		}
		evals++
		g.sums = append(slices.Clone(g.known), sums...)
		if consistentAt(g, first, sizedProbe) == nil && consistentAt(g, first+1, sizedProbe) == nil { // at two sizes: no coincidence
			return true
		}
		g.sums = slices.Clone(g.known)
		return false
	}
	for _, c := range cands {
		if try([]dimSum{c}) {
			return nil
		}
	}
	for i, c := range cands {
		for _, d := range cands[i+1:] {
			if compatible(c, d) && try([]dimSum{c, d}) {
				return nil
			}
		}
	}
	if _, perr := newProbe(g, first); evaluates || perr == nil {
		return nil // it evaluates, off its declarations: as before ties were searched
	}
	return err
}

// sizedProbe is a probe at first and up with no dimension set to 1.
func sizedProbe(g *graph, first int) (*probe, error) { return evalProbe(g, first, nil) }

// compatible reports whether two ties can hold together: they set
// different dimensions, and neither sets a dimension the other adds.
func compatible(a, b dimSum) bool {
	return a.dim != b.dim && !slices.Contains(a.terms, b.dim) && !slices.Contains(b.terms, a.dim)
}

// candidateSums lists the ties to try, without repeats: declared sums of
// the outputs matched to each input dimension they could set, then
// equalities, then sums of two.
func candidateSums(g *graph, dims []string) []dimSum {
	var out []dimSum
	seen := map[string]bool{}
	add := func(s dimSum) {
		if slices.Contains(s.terms, s.dim) || seen[s.String()] {
			return
		}
		for _, t := range s.terms {
			if !slices.Contains(dims, t) {
				return
			}
		}
		seen[s.String()] = true
		out = append(out, s)
	}
	for _, terms := range declaredSums(g) {
		for _, d := range dims {
			add(dimSum{dim: d, terms: terms})
		}
	}
	for _, d := range dims {
		for _, e := range dims {
			add(dimSum{dim: d, terms: []string{e}})
		}
	}
	for _, d := range dims {
		for i, e := range dims {
			for _, f := range dims[i+1:] {
				add(dimSum{dim: d, terms: []string{e, f}})
			}
		}
	}
	return out
}

// declaredSums reads the symbolic dimensions of the graph's outputs and
// value infos that are sums of names, "past_sequence + sequence", in the
// order first seen.
func declaredSums(g *graph) [][]string {
	gp := g.Model.GetGraph()
	var out [][]string
	seen := map[string]bool{}
	for _, vi := range append(slices.Clone(gp.GetOutput()), gp.GetValueInfo()...) {
		for _, d := range onnxio.Dims(vi) {
			terms, ok := parseSum(d.Param)
			if ok && !seen[d.Param] {
				seen[d.Param] = true
				out = append(out, terms)
			}
		}
	}
	return out
}

// parseSum splits "a + b + c" into its names; a single name, a constant
// term or any other operator is no sum.
func parseSum(expr string) ([]string, bool) {
	parts := strings.Split(expr, "+")
	if len(parts) < 2 {
		return nil, false
	}
	terms := make([]string, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" || strings.ContainsAny(p, " -*/()") {
			return nil, false
		}
		if _, err := strconv.Atoi(p); err == nil {
			return nil, false
		}
		terms[i] = p
	}
	return terms, true
}

// applySums sets the tied dimensions of a probe from the free ones.
func applySums(dims map[string]int, sums []dimSum) error {
	for _, s := range sums {
		n := 0
		for _, t := range s.terms {
			v, ok := dims[t]
			if !ok {
				return fmt.Errorf("dimension %q is tied to %q, which no input has", s.dim, t)
			}
			n += v
		}
		dims[s.dim] = n
	}
	return nil
}

// consistentProbe evaluates the graph at a probe and checks that every
// output has the rank it declares and the sizes of its symbolic
// dimensions that the inputs share, or declared sums of them.
func consistentProbe(g *graph, first int) error {
	return consistentAt(g, first, newProbe)
}

// consistentAt is consistentProbe with the probe built by probeAt.
func consistentAt(g *graph, first int, probeAt func(*graph, int) (*probe, error)) error {
	p, err := probeAt(g, first)
	if err != nil {
		return err
	}
	for _, vi := range g.Model.GetGraph().GetOutput() {
		if !onnxio.HasShape(vi) {
			continue
		}
		shape, err := p.shape(vi.GetName())
		if err != nil {
			return err
		}
		dims := onnxio.Dims(vi)
		if len(dims) != len(shape) {
			return fmt.Errorf("output %q has shape %s at the probe, but declares %s", vi.GetName(), fmtShape(shape), onnxio.FormatDims(dims))
		}
		for i, d := range dims {
			if d.Known {
				continue // exporters write traced sizes for dimensions they did not mark dynamic
			}
			want, ok := declaredSize(d, p.dims)
			if ok && shape[i] != want {
				return fmt.Errorf("output %q has shape %s at the probe, but declares %s", vi.GetName(), fmtShape(shape), onnxio.FormatDims(dims))
			}
		}
	}
	return nil
}

// declaredSize is the size a symbolic dimension has at a probe: the size
// of the input dimension it names, or the sum of those it adds; false for
// a name no input has.
func declaredSize(d onnxio.Dim, dims map[string]int) (int, bool) {
	if n, ok := dims[d.Param]; ok {
		return n, true
	}
	terms, ok := parseSum(d.Param)
	if !ok {
		return 0, false
	}
	n := 0
	for _, t := range terms {
		v, ok := dims[t]
		if !ok {
			return 0, false
		}
		n += v
	}
	return n, true
}
