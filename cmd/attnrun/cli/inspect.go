package cli

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

func newInspectCommand() *cobra.Command {
	var shapes []string
	cmd := &cobra.Command{
		Use:   "inspect MODEL.yaml|PRESET|FILE.onnx",
		Short: "Describe a model or ONNX file: layers, parameters, FLOPs, ops, weights",
		Long: `inspect describes a model config, a preset or an ONNX file.

For a model it prints each layer with its type, inputs and parameter count,
and, for an input shape (--shape, or a preset's example input), each layer's
output shape and the FLOPs of a forward pass, with totals. FLOPs count 2 per
multiply-add of the matrix products (projections, QKᵀ, weights·V), with
attention counted over all Tq×Tk pairs even where a causal mask hides some
(attnrun's kernels skip the hidden tiles); elementwise work (softmax, masks,
norms, activations, adds) is not counted. A layer type that does not count
its FLOPs shows "?", and the total is then a lower bound.

For an ONNX file it prints its producer and opsets, its inputs and outputs
with their (possibly symbolic) shapes, how often each op occurs, and every
initializer with its shape and size; then the attnrun layers the graph lifts
to (what attnrun import would build), with the same per-layer table, or
which nodes cannot be lifted and why. A file attnrun wrote shows the layers
of its metadata. FLOPs need --shape unless the graph's inputs have fixed
shapes.`,
		Example: `  attnrun inspect seed-mha-wrapper
  attnrun inspect model.yaml --shape 4,512,768
  attnrun inspect cross.yaml --shape 2,16,64 --shape 2,40,64   # one per model input
  attnrun inspect testdata/onnx/multihead_opset17_dynamic/model.onnx --shape 2,5,8`,
		Args: oneArg("a model config, preset name or ONNX file"),
	}
	lim := addLimitFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		dims, err := parseShapes(shapes)
		if err != nil {
			return err
		}
		return lim.run(func() error {
			if isONNX(args[0]) {
				return inspectONNX(cmd.OutOrStdout(), lim, args[0], dims)
			}
			return inspectModel(cmd.OutOrStdout(), lim, args[0], dims)
		})
	}
	cmd.Flags().StringArrayVar(&shapes, "shape", nil,
		"input shape for output shapes and FLOPs, e.g. 2,6,3 for (B, T, d) or 6,3; repeat for each model input (default: a preset's example input)")
	return cmd
}

// parseShapes reads the --shape flags: comma-separated positive sizes.
func parseShapes(flags []string) ([]tensor.Shape, error) {
	var shapes []tensor.Shape
	for _, flag := range flags {
		var shape tensor.Shape
		for _, part := range strings.Split(flag, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(part))
			if err != nil || n <= 0 {
				return nil, usageError{fmt.Errorf("--shape %q: want positive sizes separated by commas, e.g. 2,6,3 for (B, T, d)", flag)}
			}
			shape = append(shape, n)
		}
		shapes = append(shapes, shape)
	}
	return shapes, nil
}

// inspectModel describes a config or preset from the shapes of its
// parameters: none is allocated, loaded or drawn.
func inspectModel(out io.Writer, lim *limits, target string, shapes []tensor.Shape) error {
	var m *models.Model
	var preset *models.Preset
	opts := lim.models()
	opts.ShapesOnly = true
	kind, err := resolveModel(target)
	if err != nil {
		return err
	}
	if kind == modelConfig {
		m, err = opts.Load(target)
	} else if preset, err = models.LookupPreset(target); err == nil {
		m, err = preset.ModelWith(opts)
	}
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "model\t%s\n", m.Name())
	if d := m.Config().Description; d != "" {
		fmt.Fprintf(w, "about\t%s\n", d)
	}
	if preset == nil {
		fmt.Fprintf(w, "file\t%s\n", target)
	}
	w.Flush()
	origin := ""
	if len(shapes) == 0 && preset != nil {
		x, err := preset.Input()
		if err != nil {
			return err
		}
		shapes, origin = []tensor.Shape{x.Shape().Clone()}, "the preset's example input"
	}
	fmt.Fprintln(out, "\nlayers")
	return layerTable(out, m, shapes, origin)
}

// inspectONNX describes an ONNX file and the attnrun layers it lifts to.
// The description needs the sizes of the external data only; lifting, for
// a file attnrun did not write, reads it.
func inspectONNX(out io.Writer, lim *limits, path string, shapes []tensor.Shape) error {
	sizes := lim.codec()
	sizes.ExternalSizesOnly = true
	sizes.MaxTensorBytes = -1 // nothing external is loaded: any size can be described
	m, err := sizes.ReadModel(path)
	if err != nil {
		return err
	}
	describeModel(out, path, m)
	if hasExternalData(m) && !lift.IsAttnrun(m) {
		if m, err = lim.readModel(path); err != nil {
			fmt.Fprintf(out, "\nattnrun layers\n  cannot be lifted: %v\n", lim.explain(err))
			return nil
		}
	}
	return describeLift(out, lim, m, shapes)
}

// hasExternalData reports whether an initializer keeps its data in
// another file.
func hasExternalData(m *onnxpb.ModelProto) bool {
	for _, t := range m.GetGraph().GetInitializer() {
		if t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
			return true
		}
	}
	return false
}

// layerTable prints one line per layer: its type, inputs and
// parameters, and for input shapes its output shape and FLOPs; then the
// totals. origin says where the shapes came from, if not from --shape.
func layerTable(out io.Writer, m *models.Model, shapes []tensor.Shape, origin string) error {
	if len(shapes) == 0 {
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, l := range m.Layers() {
			fmt.Fprintf(w, "  %s\t%s\treads %s\tparams %s\n", l.Name, l.Type, strings.Join(l.Inputs, ", "), groupDigits(models.CountParams(l.Params)))
		}
		w.Flush()
		fmt.Fprintf(out, "  total: %s\n", quantity(int64(m.NumParams()), "parameters"))
		fmt.Fprintf(out, "  output shapes and FLOPs: give --shape B,T,d (or T,d) for each input (%s)\n",
			strings.Join(m.Config().Inputs, ", "))
		return nil
	}
	names := m.Config().Inputs
	if len(shapes) != len(names) {
		return usageError{fmt.Errorf("model %q takes %d input(s) (%s), got %d --shape",
			m.Name(), len(names), strings.Join(names, ", "), len(shapes))}
	}
	var given []string
	for i, name := range names {
		given = append(given, name+" "+models.FormatShape(shapes[i]))
	}
	prof, err := m.Profile(shapes...)
	if err != nil {
		return fmt.Errorf("for %s: %w", strings.Join(given, ", "), err)
	}
	if origin != "" {
		origin = ", " + origin
	}
	fmt.Fprintf(out, "  for %s%s\n", strings.Join(given, ", "), origin)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for i, l := range prof.Layers {
		flops := "?"
		if l.Counted {
			flops = groupDigits(l.FLOPs)
		}
		fmt.Fprintf(w, "  %s\t%s\treads %s\tparams %s\toutput %s\tFLOPs %s\n",
			l.Name, l.Type, strings.Join(m.Layers()[i].Inputs, ", "), groupDigits(l.Params), models.FormatShape(l.Output), flops)
	}
	w.Flush()
	total := quantity(prof.FLOPs, "FLOPs")
	if len(prof.Uncounted) > 0 {
		total = fmt.Sprintf("at least %s (\"?\": the layer's type does not count FLOPs: %s)", total, strings.Join(prof.Uncounted, ", "))
	}
	fmt.Fprintf(out, "  total: %s, %s per forward pass\n", quantity(prof.Params, "parameters"), total)
	fmt.Fprintln(out, "  (FLOPs: 2 per multiply-add of the matrix products, attention over all Tq×Tk pairs; elementwise work not counted)")
	return nil
}

// groupDigits writes n with thousands separators: 12,345,678.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// quantity says "2,016 FLOPs", adding a short form for large numbers:
// "12,582,912 parameters (12.6 M)".
func quantity(n int64, unit string) string {
	s := groupDigits(n) + " " + unit
	for _, u := range []struct {
		scale  float64
		suffix string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e4, "k"}} {
		if float64(n) >= u.scale {
			scale := u.scale
			if u.suffix == "k" {
				scale = 1e3
			}
			return fmt.Sprintf("%s (%.1f %s)", s, float64(n)/scale, u.suffix)
		}
	}
	return s
}

func describeModel(out io.Writer, path string, m *onnxpb.ModelProto) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer w.Flush()
	producer := strings.TrimSpace(m.GetProducerName() + " " + m.GetProducerVersion())
	fmt.Fprintf(w, "file\t%s\n", path)
	fmt.Fprintf(w, "producer\t%s\n", orNone(producer))
	fmt.Fprintf(w, "ir_version\t%d\n", m.GetIrVersion())
	var opsets []string
	for _, o := range m.GetOpsetImport() {
		domain := o.GetDomain()
		if domain == "" {
			domain = "ai.onnx"
		}
		opsets = append(opsets, fmt.Sprintf("%s %d", domain, o.GetVersion()))
	}
	fmt.Fprintf(w, "opsets\t%s\n", strings.Join(opsets, ", "))
	for _, p := range m.GetMetadataProps() {
		fmt.Fprintf(w, "metadata\t%s (%d bytes)\n", p.GetKey(), len(p.GetValue()))
	}
	g := m.GetGraph()
	inits := map[string]bool{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	fmt.Fprintln(w, "\ninputs")
	for _, vi := range g.GetInput() {
		if !inits[vi.GetName()] {
			fmt.Fprintf(w, "  %s\t%s\t%s\n", vi.GetName(), onnxio.ElemType(vi), shapeOfInfo(vi))
		}
	}
	fmt.Fprintln(w, "outputs")
	for _, vi := range g.GetOutput() {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", vi.GetName(), onnxio.ElemType(vi), shapeOfInfo(vi))
	}
	counts := map[string]int{}
	for _, n := range g.GetNode() {
		op := n.GetOpType()
		if n.GetDomain() != "" {
			op = n.GetDomain() + "." + op
		}
		counts[op]++
	}
	ops := make([]string, 0, len(counts))
	for op := range counts {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool {
		if counts[ops[i]] != counts[ops[j]] {
			return counts[ops[i]] > counts[ops[j]]
		}
		return ops[i] < ops[j]
	})
	fmt.Fprintf(w, "\nops (%d nodes)\n", len(g.GetNode()))
	for _, op := range ops {
		fmt.Fprintf(w, "  %s\t%d\n", op, counts[op])
	}
	fmt.Fprintf(w, "\ninitializers (%d)\n", len(g.GetInitializer()))
	var total int64
	for _, t := range g.GetInitializer() {
		size := tensorBytes(t)
		total = addBytes(total, size)
		fmt.Fprintf(w, "  %s\t%s\t%v\t%s\n", t.GetName(), onnxio.DataType(t.GetDataType()), t.GetDims(), humanBytes(size))
	}
	fmt.Fprintf(w, "  total\t\t\t%s\n", humanBytes(total))
}

// describeLift shows which attnrun layers a file lifts to, with their
// parameters and, for input shapes (given, or fixed in the graph), FLOPs;
// or why the file does not lift. A file attnrun wrote is described from
// its metadata's config, without loading its parameters.
func describeLift(out io.Writer, lim *limits, m *onnxpb.ModelProto, shapes []tensor.Shape) error {
	fmt.Fprintln(out, "\nattnrun layers")
	origin := ""
	if len(shapes) == 0 {
		if shapes = fixedInputShapes(m); shapes != nil {
			origin = "the graph's fixed input shape"
		}
	}
	if config, ok := onnxio.Metadata(m, export.MetadataConfig); ok {
		opts := lim.models()
		opts.ShapesOnly = true
		model, err := opts.Parse([]byte(config), "metadata "+export.MetadataConfig)
		if err != nil {
			fmt.Fprintf(out, "  written by attnrun, but its config cannot be read: %v\n", err)
			return nil
		}
		fmt.Fprintf(out, "  written by attnrun: model %q, described from its metadata\n", model.Name())
		return layerTable(out, model, shapes, origin)
	}
	res, err := lim.liftOptions(lift.Options{}).Lift(m)
	var unlifted *lift.UnliftedError
	switch {
	case errors.As(err, &unlifted):
		fmt.Fprintln(out, "  cannot be lifted completely (attnrun import --partial keeps these as ONNX subgraphs):")
		printUnlifted(out, unlifted.Nodes)
		return nil
	case err != nil:
		fmt.Fprintf(out, "  cannot be lifted: %v\n", lim.explain(err))
		return nil
	}
	fmt.Fprintf(out, "  lifts to model %q (checked against the graph: max abs diff %.3g)\n", res.Model.Name(), res.Check.MaxAbs)
	return layerTable(out, res.Model, shapes, origin)
}

// fixedInputShapes returns the shapes of the graph's inputs if every
// dimension of every one is fixed, else nil.
func fixedInputShapes(m *onnxpb.ModelProto) []tensor.Shape {
	inits := map[string]bool{}
	for _, t := range m.GetGraph().GetInitializer() {
		inits[t.GetName()] = true
	}
	var shapes []tensor.Shape
	for _, vi := range m.GetGraph().GetInput() {
		if inits[vi.GetName()] {
			continue
		}
		dims := onnxio.Dims(vi)
		if len(dims) == 0 {
			return nil
		}
		var shape tensor.Shape
		for _, d := range dims {
			if !d.Known || d.Value <= 0 || d.Value > math.MaxInt32 {
				return nil
			}
			shape = append(shape, int(d.Value))
		}
		shapes = append(shapes, shape)
	}
	return shapes
}

func shapeOfInfo(vi *onnxpb.ValueInfoProto) string {
	if !onnxio.HasShape(vi) {
		return "[?]"
	}
	return onnxio.FormatDims(onnxio.Dims(vi))
}

// tensorBytes is a tensor's size from its declared dims, or -1 when a dim
// is negative or the size overflows int64.
func tensorBytes(t *onnxpb.TensorProto) int64 {
	n := int64(1)
	for _, d := range t.GetDims() {
		if d < 0 || d > 0 && n > math.MaxInt64/d {
			return -1
		}
		n *= d
	}
	return budget.Bytes(n, max(onnxio.ElemBytes(onnxio.DataType(t.GetDataType())), 1))
}

// addBytes adds a size to a total; -1 (an overflowed size) makes it -1.
func addBytes(total, n int64) int64 {
	if total < 0 || n < 0 || total > math.MaxInt64-n {
		return -1
	}
	return total + n
}

func humanBytes(n int64) string {
	switch {
	case n < 0:
		return "(beyond int64)"
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
