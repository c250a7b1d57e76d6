package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/plot"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/registry"
)

// The sentences of the seed notebooks, which label a preset's tokens when
// their count matches: 000, 003 and 004 embed the six words of the first,
// 001 the five of the second.
var presetSentences = []string{
	"Your journey starts with one step",
	"This is an example sentence",
}

type plotFlags struct {
	weights string
	inputs  []string
	seed    uint64
	tokens  string
	layer   string
	batch   int
	output  string
}

func newPlotCommand() *cobra.Command {
	var f plotFlags
	cmd := &cobra.Command{
		Use:   "plot MODEL.yaml|PRESET -o attn.png",
		Short: "Draw the attention weights of every layer and head as heatmaps",
		Long: `plot runs the model (in eval mode, with the weights and input run would use)
and draws the attention weights of each attention layer and head as a labelled
heatmap in a PNG: one row of panels per layer, one panel per head, queries
down and keys across, and one viridis colour scale from 0 to the largest
weight. Masked cells hold weight 0 and are left without a number.

Tokens are labelled t0, t1, ... or with the words of --tokens (one per token).
A preset from the notebooks is labelled with the notebook's sentence when the
word count fits. A batched input shows one element, --batch (default 0).

ONNX files cannot be plotted: attnrun's graph executor does not expose the
attention weights inside a graph.`,
		Example: `  attnrun plot seed-mha-wrapper -o attn.png
  attnrun plot seed-masked-weights --tokens "Your journey starts with one step" -o masked.png
  attnrun plot model.yaml --weights w.npz --input x.npy --layer attn -o attn.png`,
		Args: oneArg("a model config or preset name"),
	}
	lim := addLimitFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return lim.run(func() error { return plotAttention(cmd.OutOrStdout(), lim, args[0], f) })
	}
	fl := cmd.Flags()
	fl.StringVar(&f.weights, "weights", "", "state dict (.npz or .safetensors) with the model's parameters")
	fl.StringArrayVar(&f.inputs, "input", nil, "input tensor (.npy); repeat for several inputs, in order")
	fl.Uint64Var(&f.seed, "seed", 0, "seed for weight initialization")
	fl.StringVar(&f.tokens, "tokens", "", `token labels, separated by spaces, one per token ("Your journey starts with one step")`)
	fl.StringVar(&f.layer, "layer", "", "plot only this attention layer")
	fl.IntVar(&f.batch, "batch", 0, "which element of a batched input to plot")
	fl.StringVarP(&f.output, "output", "o", "", "the PNG file to write (required)")
	return cmd
}

// plotAttention runs the model, draws its attention weights and writes the PNG.
func plotAttention(out io.Writer, lim *limits, target string, f plotFlags) error {
	if f.output == "" {
		return usageError{errors.New("plot needs the image file to write: -o attn.png")}
	}
	fig, err := attentionFigure(lim, target, f)
	if err != nil {
		return err
	}
	if err := fig.WriteFile(f.output); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %d layer(s), %d token(s)\n", f.output, len(fig.Rows), len(fig.Queries))
	return nil
}

// attentionFigure runs the model with a hook on every attention layer and
// lays out what the hook saw: one row of heatmaps per layer, one per head.
func attentionFigure(lim *limits, target string, f plotFlags) (*plot.Figure, error) {
	if isONNX(target) {
		return nil, fmt.Errorf("%s: plot takes a model config or a preset, not an ONNX file: attnrun's graph executor does not expose the attention weights inside a graph", target)
	}
	src, err := openSource(lim, target, f.weights, f.seed)
	if err != nil {
		return nil, err
	}
	inputs, err := src.inputs(f.inputs)
	if err != nil {
		return nil, err
	}
	seen, err := attentionWeights(lim, src.model, inputs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", target, err)
	}
	if f.layer != "" {
		seen, err = onlyLayer(src.model, seen, f.layer)
		if err != nil {
			return nil, err
		}
	}
	shape := seen[0].weights.Shape() // (B, H, Tq, Tk)
	batch, tq, tk := shape[0], shape[2], shape[3]
	for _, s := range seen[1:] {
		if sh := s.weights.Shape(); sh[0] != batch || sh[2] != tq || sh[3] != tk {
			return nil, fmt.Errorf("%s: layers %q and %q attend over different shapes, %v and %v; plot one at a time with --layer",
				target, seen[0].layer, s.layer, shape, sh)
		}
	}
	if f.batch < 0 || f.batch >= batch {
		return nil, usageError{fmt.Errorf("--batch %d: the input has a batch of %d (0 to %d)", f.batch, batch, batch-1)}
	}
	queries, keys, err := tokenLabels(src, f, tq, tk)
	if err != nil {
		return nil, err
	}
	name := src.model.Name()
	if src.preset != nil {
		name = src.preset.Name
	}
	return newFigure(name, seen, f.batch, queries, keys), nil
}

// newFigure lays out the weights of one batch element: a row of panels per
// layer, a panel per head.
func newFigure(name string, seen []layerWeights, batch int, queries, keys []string) *plot.Figure {
	fig := &plot.Figure{
		Title:    name + " · attention weights",
		Subtitle: "rows: queries · columns: keys",
		Queries:  queries,
		Keys:     keys,
	}
	if b := seen[0].weights.Shape()[0]; b > 1 {
		fig.Title += fmt.Sprintf(" · batch %d of %d", batch, b)
	}
	cells := len(queries) * len(keys)
	for _, s := range seen {
		heads := s.weights.Shape()[1]
		data := s.weights.Data().([]float32)
		var row []plot.Heatmap
		for h := range heads {
			at := (batch*heads + h) * cells
			row = append(row, plot.Heatmap{
				Title:   fmt.Sprintf("%s · head %d", s.layer, h),
				Weights: append([]float32(nil), data[at:at+cells]...),
			})
		}
		fig.Rows = append(fig.Rows, row)
	}
	if hasZero(fig) {
		fig.Subtitle += " · cells without a number hold 0 (masked)"
	}
	return fig
}

// hasZero reports whether any weight is exactly 0, as masked ones are: the
// picture then says what its empty cells mean.
func hasZero(fig *plot.Figure) bool {
	for _, row := range fig.Rows {
		for _, h := range row {
			for _, w := range h.Weights {
				if w == 0 {
					return true
				}
			}
		}
	}
	return false
}

// layerWeights is what the hook saw of one attention layer: its path and
// its weights, (B, H, Tq, Tk).
type layerWeights struct {
	layer   string
	weights *tensor.Dense
}

// attentionWeights runs the model once in eval mode and returns the weights
// of every attention layer in the order they ran. The weights kept count
// against the memory budget: a long input through many layers is refused
// rather than held.
func attentionWeights(lim *limits, m *models.Model, inputs []*tensor.Dense) ([]layerWeights, error) {
	var seen []layerWeights
	var bad error
	var mu sync.Mutex // the contract does not promise one goroutine per pass
	kept := budget.New(int64(lim.maxMemory))
	run := &registry.Run{Context: lim.ctx, Hook: func(layer string, w *tensor.Dense) {
		mu.Lock()
		defer mu.Unlock()
		if bad == nil {
			bad = checkWeights(layer, w)
		}
		if bad == nil {
			bad = kept.Reserve(budget.Bytes(int64(w.Shape().TotalSize()), 4), fmt.Sprintf("the attention weights of layer %q, %s", layer, models.FormatShape(w.Shape())))
		}
		if bad == nil {
			seen = append(seen, layerWeights{layer, w})
		}
	}}
	if _, err := m.Forward(run, inputs...); err != nil {
		return nil, err
	}
	if bad != nil {
		return nil, bad
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("model %q has no attention layers, nothing to plot (layers: %s)", m.Name(), describeLayers(m))
	}
	return seen, nil
}

// checkWeights holds a layer to the hook's contract: float32 weights shaped
// (B, H, Tq, Tk), so that a custom layer that breaks it gets an error, not
// a panic.
func checkWeights(layer string, w *tensor.Dense) error {
	if w.Dtype() != tensor.Float32 || len(w.Shape()) != 4 {
		return fmt.Errorf("layer %q gave attention weights of type %v and shape %v, want float32 (B, H, Tq, Tk)", layer, w.Dtype(), w.Shape())
	}
	if n := len(w.Data().([]float32)); n != w.Shape().TotalSize() {
		return fmt.Errorf("layer %q gave attention weights of shape %v with %d values", layer, w.Shape(), n)
	}
	return nil
}

// onlyLayer keeps the weights of the layer --layer names.
func onlyLayer(m *models.Model, seen []layerWeights, name string) ([]layerWeights, error) {
	var kept []layerWeights
	var names []string
	for _, s := range seen {
		if s.layer == name {
			kept = append(kept, s)
		}
		names = append(names, s.layer)
	}
	if len(kept) > 0 {
		return kept, nil
	}
	if hasLayer(m, name) {
		return nil, usageError{fmt.Errorf("--layer %q: that layer computes no attention weights; attention layers: %s",
			name, strings.Join(names, ", "))}
	}
	return nil, usageError{fmt.Errorf("--layer %q: model %q has no such layer; attention layers: %s",
		name, m.Name(), strings.Join(names, ", "))}
}

// tokenLabels labels the queries and keys: with the words of --tokens, with
// the notebook's sentence for a preset on its own input, or t0, t1, ...
func tokenLabels(src *source, f plotFlags, tq, tk int) (queries, keys []string, err error) {
	if f.tokens != "" {
		words := strings.Fields(f.tokens)
		if len(words) != tq || len(words) != tk {
			return nil, nil, usageError{fmt.Errorf("--tokens has %d words (%q), the input has %s",
				len(words), f.tokens, tokenCount(tq, tk))}
		}
		return words, words, nil
	}
	if src.preset != nil && len(f.inputs) == 0 && tq == tk {
		for _, s := range presetSentences {
			if words := strings.Fields(s); len(words) == tq {
				return words, words, nil
			}
		}
	}
	return numbered(tq), numbered(tk), nil
}

func tokenCount(tq, tk int) string {
	if tq == tk {
		return fmt.Sprintf("%d tokens", tq)
	}
	return fmt.Sprintf("%d queries and %d keys", tq, tk)
}

// numbered returns the labels t0, t1, ..., t(n-1).
func numbered(n int) []string {
	labels := make([]string, n)
	for i := range labels {
		labels[i] = fmt.Sprintf("t%d", i)
	}
	return labels
}

// describeLayers lists a model's layers as "name (type)".
func describeLayers(m *models.Model) string {
	var parts []string
	for _, l := range m.Layers() {
		parts = append(parts, fmt.Sprintf("%s (%s)", l.Name, l.Type))
	}
	return strings.Join(parts, ", ")
}
