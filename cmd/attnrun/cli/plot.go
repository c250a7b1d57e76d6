package cli

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/plot"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio/lift"
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
	// seedGiven records --seed on the command line: a lifted config runs
	// on random weights only when asked.
	seedGiven bool
	labels    string
	tokens    string
	layers    []string
	heads     string
	batch     int
	output    string
}

func newPlotCommand() *cobra.Command {
	var f plotFlags
	cmd := &cobra.Command{
		Use:   "plot MODEL.yaml|PRESET|FILE.onnx -o attn.png|attn.svg|attn.jpg",
		Short: "Draw the attention weights of every layer and head as heatmaps",
		Long: `plot runs the model (in eval mode, with the weights and input run would use)
and draws the attention weights of each attention layer and head as a labelled
heatmap: the panels flow through a grid, the heads of the first layer first,
each titled "layer · head"; queries run down and keys across, and one viridis
colour scale from 0 to the largest weight serves every panel. Masked cells
hold weight 0 and are left without a number.

The format follows the extension of -o: .png, .svg or .jpg/.jpeg. A picture
stays within 4096 pixels a side: many panels or long inputs get smaller
cells, down to one pixel, and then each cell shows the largest weight of a
square of tokens (the subtitle says so). An SVG holds at most about a million
cells.

Choose what to draw with --layer (one or more attention layers; default
all), --heads (head numbers and ranges: 0,3,5 or 0:4) and --tokens (a
Python-like range of queries and keys: 0:64, -16: for the last 16, or
0:8,0:64 for queries 0-7 over keys 0-63). A batched input shows one
element, --batch (default 0).

Tokens are labelled t0, t1, ... or with the words of --labels (one per
token). A preset from the notebooks is labelled with the notebook's sentence
when the word count fits.

An ONNX file attnrun wrote (attnrun export, attnrun import) is plotted from
its layers and weights; other ONNX files are refused (attnrun import lifts
them first). A config that attnrun import lifted needs its weights: --weights.`,
		Example: `  attnrun plot seed-mha-wrapper -o attn.png
  attnrun plot seed-masked-weights --labels "Your journey starts with one step" -o masked.svg
  attnrun plot model.yaml --weights w.npz --input x.npy --layer attn -o attn.png
  attnrun plot lifted.onnx --input x.npy --layer layer3,layer4 --heads 0:4 --tokens 0:64 -o attn.jpg`,
		Args: oneArg("a model config, preset name or ONNX file attnrun wrote"),
	}
	lim := addLimitFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		f.seedGiven = cmd.Flags().Changed("seed")
		return lim.run(func() error { return plotAttention(cmd.OutOrStdout(), lim, args[0], f) })
	}
	fl := cmd.Flags()
	fl.StringVar(&f.weights, "weights", "", "state dict (.npz or .safetensors) with the model's parameters")
	fl.StringArrayVar(&f.inputs, "input", nil, "input tensor (.npy; .pb for ONNX files); repeat for several inputs, in order")
	fl.Uint64Var(&f.seed, "seed", 0, "seed for weight initialization")
	fl.StringVar(&f.labels, "labels", "", `token labels, separated by spaces, one per token ("Your journey starts with one step")`)
	fl.StringVar(&f.tokens, "tokens", "", "the queries and keys to draw, a range START:STOP (0:64, -16:) or QUERIES,KEYS (0:8,0:64); default all")
	fl.StringSliceVar(&f.layers, "layer", nil, "plot only these attention layers (repeat, or separate with commas); default all")
	fl.StringVar(&f.heads, "heads", "", "plot only these heads of each layer: numbers and ranges, e.g. 0,3,5 or 0:4; default all")
	fl.IntVar(&f.batch, "batch", 0, "which element of a batched input to plot")
	fl.StringVarP(&f.output, "output", "o", "", "the image file to write, .png, .svg or .jpg (required)")
	return cmd
}

// plotAttention runs the model, draws its attention weights and writes the
// image.
func plotAttention(out io.Writer, lim *limits, target string, f plotFlags) error {
	if f.output == "" {
		return usageError{errors.New("plot needs the image file to write: -o attn.png (or .svg, .jpg)")}
	}
	if _, err := plot.FormatOf(f.output); err != nil {
		return usageError{fmt.Errorf("-o %w", err)}
	}
	fig, err := attentionFigure(lim, target, f)
	if err != nil {
		return err
	}
	layout, err := fig.Layout()
	if err == nil {
		err = fig.WriteFile(f.output)
	}
	if errors.Is(err, plot.ErrTooLarge) {
		return fmt.Errorf("%w; choose fewer with --layer, --heads or --tokens", err)
	}
	if err != nil {
		return err
	}
	panels := 0
	for _, row := range fig.Rows {
		panels += len(row)
	}
	fmt.Fprintf(out, "%s: %d panel(s) of %d×%d tokens from %d layer(s), a %d×%d grid, %d×%d pixels",
		f.output, panels, len(fig.Queries), len(fig.Keys), len(fig.Rows), layout.Grid.X, layout.Grid.Y, layout.Size.X, layout.Size.Y)
	if layout.Bin > 1 {
		fmt.Fprintf(out, ", a cell for every %d×%d tokens", layout.Bin, layout.Bin)
	}
	fmt.Fprintln(out)
	return nil
}

// attentionFigure runs the model with a hook on every attention layer and
// lays out what the flags select of what the hook saw.
func attentionFigure(lim *limits, target string, f plotFlags) (*plot.Figure, error) {
	tokens, err := parseTokens(f.tokens)
	if err != nil {
		return nil, err
	}
	heads, err := parseHeads(f.heads)
	if err != nil {
		return nil, err
	}
	src, err := openPlotSource(lim, target, f)
	if err != nil {
		return nil, err
	}
	inputs, err := plotInputs(lim, src, target, f.inputs)
	if err != nil {
		return nil, err
	}
	seen, err := attentionWeights(lim, src.model, inputs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", target, err)
	}
	if seen, err = onlyLayers(src.model, seen, f.layers); err != nil {
		return nil, err
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
	qs, ks, err := tokens.resolve(tq, tk)
	if err != nil {
		return nil, err
	}
	name := src.model.Name()
	switch {
	case src.preset != nil:
		name = src.preset.Name
	case isONNX(target):
		name = filepath.Base(target)
	}
	fig := &plot.Figure{
		Title:    name + " · attention weights",
		Subtitle: "rows: queries · columns: keys",
		Queries:  queries[qs.start:qs.stop],
		Keys:     keys[ks.start:ks.stop],
	}
	if batch > 1 {
		fig.Title += fmt.Sprintf(" · batch %d of %d", f.batch, batch)
	}
	if f.tokens != "" {
		fig.Subtitle += fmt.Sprintf(" · queries %d:%d of %d, keys %d:%d of %d", qs.start, qs.stop, tq, ks.start, ks.stop, tk)
	}
	for _, s := range seen {
		picked, err := selectHeads(heads, f.heads, s.layer, s.weights.Shape()[1])
		if err != nil {
			return nil, err
		}
		fig.Rows = append(fig.Rows, panels(s, f.batch, picked, qs, ks))
	}
	if hasZero(fig) {
		fig.Subtitle += " · cells without a number hold 0 (masked)"
	}
	return fig, nil
}

// panels cuts the heatmaps of one layer out of its weights (B, H, Tq, Tk):
// the given heads of one batch element, queries qs over keys ks.
func panels(s layerWeights, batch int, heads []int, qs, ks span) []plot.Heatmap {
	shape := s.weights.Shape()
	h, tq, tk := shape[1], shape[2], shape[3]
	data := s.weights.Data().([]float32)
	var row []plot.Heatmap
	for _, head := range heads {
		at := func(q int) int { return ((batch*h+head)*tq + q) * tk }
		var w []float32
		if ks.len() == tk {
			// Whole rows lie side by side: the panel is a view of the
			// weights, which a deep model's many panels need not copy.
			w = data[at(qs.start):at(qs.stop)]
		} else {
			w = make([]float32, 0, qs.len()*ks.len())
			for q := qs.start; q < qs.stop; q++ {
				w = append(w, data[at(q)+ks.start:at(q)+ks.stop]...)
			}
		}
		row = append(row, plot.Heatmap{Title: fmt.Sprintf("%s · head %d", s.layer, head), Weights: w})
	}
	return row
}

// openPlotSource opens the model as run does (openSourceWith): a config,
// a preset, or an ONNX file attnrun wrote with the weights of its
// initializers. Other ONNX files are refused (their weights are in a graph
// plot cannot look inside), and so is a config attnrun import lifted given
// without its weights, unless --seed asks for random ones: a picture of
// random attention looks like an answer.
func openPlotSource(lim *limits, target string, f plotFlags) (*source, error) {
	return openSourceWith(lim, target, sourceOptions{weights: f.weights, seed: f.seed, seedGiven: f.seedGiven})
}

// plotInputs reads the --input tensors: as run reads them for a config or
// preset, and for an ONNX file as run reads a file attnrun wrote (.npy or
// .pb, any numeric type, converted for the layers).
func plotInputs(lim *limits, src *source, target string, paths []string) ([]*tensor.Dense, error) {
	if !isONNX(target) {
		return src.inputs(paths)
	}
	names := src.model.Config().Inputs
	if len(paths) != len(names) {
		return nil, usageError{fmt.Errorf("%s takes %d input(s) (%s), got %d --input", target, len(names), strings.Join(names, ", "), len(paths))}
	}
	inputs := make([]*tensor.Dense, len(paths))
	for i, p := range paths {
		t, err := lim.readTensor(p)
		if err != nil {
			return nil, err
		}
		if inputs[i], err = lift.ModelInput(t); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return inputs, nil
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

// onlyLayers keeps the weights of the layers --layer names, in the order
// the model ran them; no names keeps every layer.
func onlyLayers(m *models.Model, seen []layerWeights, names []string) ([]layerWeights, error) {
	if len(names) == 0 {
		return seen, nil
	}
	var attention []string
	for _, s := range seen {
		attention = append(attention, s.layer)
	}
	for _, name := range names {
		switch {
		case slices.Contains(attention, name):
		case hasLayer(m, name):
			return nil, usageError{fmt.Errorf("--layer %q: that layer computes no attention weights; attention layers: %s",
				name, strings.Join(attention, ", "))}
		default:
			return nil, usageError{fmt.Errorf("--layer %q: model %q has no such layer; attention layers: %s",
				name, m.Name(), strings.Join(attention, ", "))}
		}
	}
	var kept []layerWeights
	for _, s := range seen {
		if slices.Contains(names, s.layer) {
			kept = append(kept, s)
		}
	}
	return kept, nil
}

// tokenLabels labels the queries and keys: with the words of --labels, with
// the notebook's sentence for a preset on its own input, or t0, t1, ...
func tokenLabels(src *source, f plotFlags, tq, tk int) (queries, keys []string, err error) {
	if f.labels != "" {
		words := strings.Fields(f.labels)
		if len(words) != tq || len(words) != tk {
			return nil, nil, usageError{fmt.Errorf("--labels has %d words (%q), the input has %s",
				len(words), f.labels, tokenCount(tq, tk))}
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
