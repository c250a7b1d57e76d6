package lift

import (
	"fmt"

	"gorgonia.org/tensor"
)

// Stretched evaluates the static value v at a probe whose sequence
// dimensions are n long: a relative position bias (T5's buckets) holds
// distances up to the sequence length only, and the probes are short. Only
// the nodes v needs are run.
func (g patternGraph) Stretched(v string, n int) (*tensor.Dense, error) {
	if !g.a.g.Static(v) {
		return nil, fmt.Errorf("value %q depends on the graph inputs", v)
	}
	first := g.a.probes[0]
	shape, err := first.shape(v)
	if err != nil {
		return nil, err
	}
	if len(shape) < 2 {
		return nil, fmt.Errorf("value %q has shape %v, not one over queries and keys", v, shape)
	}
	rows, cols := shape[len(shape)-2], shape[len(shape)-1]
	dims := map[string]int{}
	stretched := false
	for name, size := range first.dims {
		dims[name] = size
		if size == rows || size == cols {
			dims[name], stretched = n, true
		}
	}
	if !stretched {
		return nil, fmt.Errorf("value %q (shape %v) is sized by no symbolic dimension of the inputs", v, shape)
	}
	if err := applySums(dims, g.a.g.sums); err != nil {
		return nil, err
	}
	p, err := probeAt(g.a.g, dims)
	if err != nil {
		return nil, err
	}
	vals, err := p.run(g.a.g.Model.GetGraph().GetNode(), nil, []string{v}, nil)
	if err != nil {
		return nil, fmt.Errorf("value %q at %d positions: %w", v, n, err)
	}
	t := vals[v]
	if t == nil {
		return nil, fmt.Errorf("value %q could not be evaluated at %d positions", v, n)
	}
	return t, nil
}
