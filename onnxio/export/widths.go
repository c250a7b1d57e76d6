package export

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/registry"
)

// An export fixes the width (last axis) of every value it can, so that the
// graph declares (batch, seq, 8) rather than (batch, seq, d) and layers can
// fold sizes into constants. Widths are found the way they are defined: by
// running the model, or one layer, on a single zero token of a given width
// and looking at what comes out. No layer has to describe its shapes.

// maxWidthProbes bounds the model runs spent guessing input widths; a model
// with many inputs of unknown width keeps them symbolic instead.
const maxWidthProbes = 256

// maxProbeWidth bounds the candidate widths: a parameter axis longer than
// this (a large embedding table) is not a token width worth a probe.
const maxProbeWidth = 1 << 16

// inputWidths returns the width of each model input: the given one (checked
// by a run), or else the single width among the sizes of the model's
// parameters that the model accepts, or 0 (symbolic) when no single width
// fits.
func inputWidths(m *models.Model, given map[string]int, layouts map[string][]string) (map[string]int, error) {
	inputs := m.Config().Inputs
	widths := map[string]int{}
	names := slices.Sorted(maps.Keys(given)) // the first error is always the same one
	for _, name := range names {
		w := given[name]
		if !slices.Contains(inputs, name) {
			return nil, fmt.Errorf("a width is given for %q, which is not an input of the model (inputs: %s)", name, quoteNames(inputs))
		}
		if isOwnLayout(layouts[name]) {
			return nil, fmt.Errorf("a width is given for %q, which is an attention mask, not a token stream", name)
		}
		if w <= 0 {
			return nil, fmt.Errorf("input %q: width %d is not positive", name, w)
		}
		widths[name] = w
	}
	var unknown []string
	for i, in := range inputs {
		if widths[in] == 0 && !isOwnLayout(layouts[in]) && m.Config().InputDtype(i) != tensor.Int64 {
			unknown = append(unknown, in)
		}
	}
	if len(unknown) == 0 {
		if err := probeModel(m, widths, layouts); err != nil {
			return nil, fmt.Errorf("the model does not accept input widths %s: %w", formatWidths(inputs, widths), err)
		}
		return widths, nil
	}

	// Try every combination of candidate widths for the unknown inputs, and
	// one width that no parameter has: if that fits too, the model takes
	// any width and the axis is symbolic.
	candidates := paramSizes(m)
	candidates = append(candidates, candidates[len(candidates)-1]+1)
	combos := 1
	for range unknown {
		combos *= len(candidates)
		if combos > maxWidthProbes {
			return widths, nil
		}
	}
	var fits []map[string]int
	for c := 0; c < combos; c++ {
		try := map[string]int{}
		for k, v := range widths {
			try[k] = v
		}
		rest := c
		for _, in := range unknown {
			try[in] = candidates[rest%len(candidates)]
			rest /= len(candidates)
		}
		if probeModel(m, try, layouts) == nil {
			fits = append(fits, try)
		}
	}
	if len(fits) == 1 {
		return fits[0], nil
	}
	return widths, nil
}

// paramSizes lists the distinct sizes of the model's parameter axes up to
// maxProbeWidth, ascending; at least one value.
func paramSizes(m *models.Model) []int {
	seen := map[int]bool{}
	var sizes []int
	for _, p := range m.Params() {
		for _, d := range p.Value.Shape() {
			if !seen[d] && d <= maxProbeWidth {
				seen[d] = true
				sizes = append(sizes, d)
			}
		}
	}
	if len(sizes) == 0 {
		sizes = append(sizes, 1)
	}
	slices.Sort(sizes)
	return sizes
}

// pooledDims is the layout of an output pooled over the tokens, as
// pool.mean's (batch, d).
var pooledDims = []string{"batch", "d"}

// probeOutput is the model's output on the probe inputs probeModel feeds,
// or nil when the model refuses them.
func probeOutput(m *models.Model, widths map[string]int, layouts map[string][]string) (out *tensor.Dense) {
	defer func() {
		if recover() != nil {
			out = nil
		}
	}()
	out, err := m.Forward(nil, probeInputs(m, widths, layouts)...)
	if err != nil {
		return nil
	}
	return out
}

// pooledWidth reports whether the model's output is pooled over the
// tokens, (batch, d) where the probe fed (1, 1, d) token streams, and its
// width d.
func (g *graph) pooledWidth() (int, bool) {
	if g.probed == nil || g.probed.Dims() != 2 || g.probed.Shape()[0] != 1 {
		return 0, false
	}
	return g.probed.Shape()[1], true
}

// probeModel runs the model on one zero token per input, of the given
// widths, and a mask of ones dimensions for each mask input.
func probeModel(m *models.Model, widths map[string]int, layouts map[string][]string) error {
	_, err := m.Forward(nil, probeInputs(m, widths, layouts)...)
	return err
}

// probeInputs are probeModel's inputs.
func probeInputs(m *models.Model, widths map[string]int, layouts map[string][]string) []*tensor.Dense {
	inputs := m.Config().Inputs
	xs := make([]*tensor.Dense, len(inputs))
	for i, in := range inputs {
		if dims := layouts[in]; isOwnLayout(dims) {
			xs[i] = layoutProbe(dims)
			continue
		}
		if m.Config().InputDtype(i) == tensor.Int64 {
			xs[i] = idsProbe()
			continue
		}
		xs[i] = zeroToken(widths[in])
	}
	return xs
}

// probeLayer returns the width of a layer's output on the given probe
// inputs (one zero token per token stream, a mask of ones dimensions per
// mask), or 0 when a probe is missing (nil: a width is unknown), the layer
// refuses the probe or its output is not a token stream.
func probeLayer(spec *models.LayerSpec, xs []*tensor.Dense) (width int) {
	defer func() {
		if recover() != nil {
			width = 0
		}
	}()
	if slices.Contains(xs, nil) {
		return 0
	}
	out, err := spec.Layer.Forward(&registry.Run{Layer: spec.Name}, xs)
	if err != nil || out == nil || out.Dims() != 3 || out.Shape()[0] != 1 || out.Shape()[1] != 1 {
		return 0
	}
	return out.Shape()[2]
}

// idsProbe is one int64 token id, (1, 1), of 0: every table has that row.
func idsProbe() *tensor.Dense {
	return tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]int64{0}))
}

// zeroToken is a (1, 1, width) zero tensor.
func zeroToken(width int) *tensor.Dense {
	return tensor.New(tensor.WithShape(1, 1, width), tensor.WithBacking(make([]float32, width)))
}

// formatWidths prints input widths as "x=3, memory=8".
func formatWidths(inputs []string, widths map[string]int) string {
	parts := make([]string, len(inputs))
	for i, in := range inputs {
		parts[i] = fmt.Sprintf("%s=%d", in, widths[in])
	}
	return strings.Join(parts, ", ")
}
