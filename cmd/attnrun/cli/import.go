package cli

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/attnrun/attnrun/internal/atomicfile"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/lift"
)

type importFlags struct {
	output    string
	configOut string
	partial   bool
	name      string
	opset     int
	stateDict string
}

func newImportCommand() *cobra.Command {
	var f importFlags
	cmd := &cobra.Command{
		Use:   "import IN.onnx -o OUT.onnx [--config-out OUT.yaml] [--partial]",
		Short: "Lift an ONNX graph (a PyTorch export) into attnrun layers",
		Long: `import recognizes the attention structures of an ONNX graph by their
structure, not their names (PyTorch renames transposed Linear weights to
onnx::MatMul_NN), and rebuilds them as attnrun layers carrying the graph's
weights: Linear (MatMul + Add, Gemm), query/key/value projections, heads split
and merged by Reshape/Transpose, scaling, causal masks cut from buffers,
learned positions, nn.MultiheadAttention's packed in_proj (self- and
cross-attention, key padding masks), the seed modules nested and in sequence,
layer norm, GELU and residuals.

The lifted model is run against the graph (with attnrun's executor) on random
inputs before anything is written: a lift that does not reproduce the graph is
an error. import prints the model config and the mapping table (graph tensor ->
parameter, with any transpose or split applied) and writes OUT.onnx: the model
exported as a graph of standard ops with the config in its metadata, so that
attnrun run and attnrun check run it on attnrun's layers. OUT.onnx replaces
IN.onnx: it declares the same inputs and outputs (names, element types, ranks,
fixed and symbolic dimensions), so that an unbatched (T, d) export stays
(T, d) and a bool mask stays bool, in ONNX Runtime as in attnrun. When some
layer has no ONNX exporter, the graph also returns attention weights or
another layer's output (BERT's pooled output), or it takes weights as graph
inputs (ONNX Runtime's Attention tests: they become parameters loaded from
those inputs on every run), OUT.onnx keeps the source graph's nodes and
adds the parameters as initializers instead.

The report says how many of the graph's computing nodes were lifted, and
under --partial which were kept and why.

What cannot be lifted is named (node, op, reason) and import exits 1; with
--partial those parts become onnx.subgraph layers, ONNX subgraphs the executor
runs inside the attnrun model, so the whole model still runs.`,
		Example: `  attnrun import testdata/onnx/multihead_opset17_dynamic/model.onnx -o mha.onnx --config-out mha.yaml
  attnrun check mha.onnx --data testdata/onnx/multihead_opset17_dynamic
  attnrun import block.onnx -o block.onnx --partial`,
		Args: oneArg("an ONNX file"),
	}
	lim := addLimitFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		{
			if f.output == "" {
				return usageError{errors.New("import needs -o OUT.onnx")}
			}
			if !hasONNXExt(f.output) {
				return usageError{fmt.Errorf("-o %s: the ONNX file name must end in .onnx", f.output)}
			}
			if err := checkStateDictName(f.stateDict); err != nil {
				return err
			}
			if f.opset < export.MinOpset || f.opset > export.MaxOpset {
				return usageError{fmt.Errorf("--opset %d: attnrun writes opsets %d to %d", f.opset, export.MinOpset, export.MaxOpset)}
			}
		}
		return lim.run(func() error { return importModel(cmd.OutOrStdout(), lim, args[0], f) })
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.output, "output", "o", "", "write the lifted model to this .onnx file")
	fl.StringVar(&f.configOut, "config-out", "", "also write the lifted model config (YAML) to this file")
	fl.StringVar(&f.stateDict, "state-dict", "", "also write the lifted weights to this .npz or .safetensors file (PyTorch state_dict names)")
	fl.BoolVar(&f.partial, "partial", false, "keep what cannot be lifted as onnx.subgraph layers run by the executor")
	fl.StringVar(&f.name, "name", "", "name of the lifted model (default \"lifted\")")
	fl.IntVar(&f.opset, "opset", export.DefaultOpset, "ONNX opset of the written graph")
	return cmd
}

func importModel(w io.Writer, lim *limits, path string, f importFlags) error {
	src, err := lim.readModel(path)
	if err != nil {
		return err
	}
	res, err := lim.liftOptions(lift.Options{Name: f.name, Partial: f.partial}).Lift(src)
	var unlifted *lift.UnliftedError
	if errors.As(err, &unlifted) {
		printUnlifted(w, unlifted.Nodes)
		if res != nil && res.Nodes > 0 {
			fmt.Fprintf(w, "\nlifted %d of %d computing nodes into attnrun layers\n", res.Lifted, res.Nodes)
		}
		return fmt.Errorf("%s: %d node(s) cannot be lifted (op types %s); --partial keeps them as ONNX subgraphs",
			path, len(unlifted.Nodes), strings.Join(opTypes(unlifted.Nodes), ", "))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out, note, err := lift.Export(src, res, export.Options{Opset: f.opset})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// Every file is written before the report is printed: `import ... |
	// head` closes the pipe early, and the process may die writing to it.
	if err := onnxio.WriteModel(f.output, out); err != nil {
		return err
	}
	written := []string{f.output}
	if f.configOut != "" {
		if err := atomicfile.WriteFile(f.configOut, []byte(configHeader(path, f)+res.Config), 0o644); err != nil {
			return err
		}
		written = append(written, f.configOut)
	}
	if f.stateDict != "" {
		if err := writeStateDict(f.stateDict, res.Model); err != nil {
			return err
		}
		written = append(written, f.stateDict)
	}
	printLift(w, res)
	if note != "" {
		fmt.Fprintf(w, "\nnote: %s\n", note)
	}
	fmt.Fprintln(w)
	for _, name := range written {
		fmt.Fprintf(w, "wrote %s\n", name)
	}
	return nil
}

// configHeader is the comment --config-out starts with: where the
// config's weights are, so that a run of it can be given them.
func configHeader(path string, f importFlags) string {
	weights := "--weights " + f.output
	if f.stateDict != "" {
		weights += " or --weights " + f.stateDict
	}
	return fmt.Sprintf("%s%s by attnrun import; its weights: %s\n", liftedHeader, path, weights)
}

// printLift shows what was lifted: the config, the mapping table, the
// outputs, and how closely the lifted model reproduced the graph.
func printLift(w io.Writer, res *lift.Result) {
	if res.Attnrun {
		fmt.Fprintln(w, "# written by attnrun: loaded from its metadata")
	}
	fmt.Fprint(w, elideGraphs(res.Config))
	if len(res.Mapping) == 0 {
		fmt.Fprintln(w, "\nno parameters")
	} else {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "graph tensor\tparameter\ttransform")
		for _, m := range res.Mapping {
			from := m.Initializer
			if from == "" {
				from = "(computed)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", from, m.Param, orDash(m.Transform))
		}
		tw.Flush()
	}
	if len(res.Outputs) > 1 {
		fmt.Fprintln(w)
		for i, o := range res.Outputs {
			what := "the model's output"
			if res.Model != nil && o.Layer != res.Model.Config().Output {
				what = fmt.Sprintf("the output of layer %s", o.Layer)
			}
			switch o.Weights {
			case "mean":
				what = fmt.Sprintf("attention weights of %s, averaged over heads", o.Layer)
			case "heads":
				what = fmt.Sprintf("attention weights of %s", o.Layer)
			}
			if o.Cache != "" {
				what = fmt.Sprintf("the %s %s caches, extending input %q", o.Cache, o.Layer, o.Past)
			}
			if o.Stack != nil {
				var parts []string
				for _, c := range o.Stack {
					parts = append(parts, c.Cache+" of "+c.Layer)
				}
				what = fmt.Sprintf("the %s stacked on a first axis, extending input %q", strings.Join(parts, ", "), o.Past)
			}
			fmt.Fprintf(w, "output %d %q: %s\n", i, o.Name, what)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if res.Nodes > 0 {
		fmt.Fprintf(w, "\nlifted %d of %d computing nodes into attnrun layers", res.Lifted, res.Nodes)
		if len(res.Unlifted) > 0 {
			fmt.Fprintf(w, "; %d kept as ONNX subgraphs", res.Nodes-res.Lifted)
		}
		fmt.Fprintln(w)
	}
	if len(res.Unlifted) > 0 {
		fmt.Fprintf(w, "\nkept as ONNX subgraphs (onnx.subgraph layers):\n")
		printUnlifted(w, res.Unlifted)
	}
	if res.Check.Runs > 0 {
		fmt.Fprintf(w, "\nchecked against the graph on %d random input set(s): max abs diff %.3g, max rel diff %.3g\n",
			res.Check.Runs, res.Check.MaxAbs, res.Check.MaxRel)
	}
}

// printUnlifted lists nodes no layer computes, grouped by reason.
func printUnlifted(w io.Writer, nodes []lift.Unlifted) {
	byReason := map[string][]string{}
	var reasons []string
	for _, u := range nodes {
		if _, ok := byReason[u.Reason]; !ok {
			reasons = append(reasons, u.Reason)
		}
		byReason[u.Reason] = append(byReason[u.Reason], fmt.Sprintf("%s (%s)", u.Node, u.Op))
	}
	for _, r := range reasons {
		fmt.Fprintf(w, "  %s\n      %s\n", r, strings.Join(byReason[r], ", "))
	}
}

// opTypes lists the distinct op types of nodes, sorted.
func opTypes(nodes []lift.Unlifted) []string {
	seen := map[string]bool{}
	var ops []string
	for _, u := range nodes {
		if !seen[u.Op] {
			seen[u.Op] = true
			ops = append(ops, u.Op)
		}
	}
	sort.Strings(ops)
	return ops
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// embeddedGraph matches the base64 graph of an onnx.subgraph layer.
var embeddedGraph = regexp.MustCompile(`graph: "([A-Za-z0-9+/=]{120,})"`)

// elideGraphs shortens the subgraphs embedded in a config for printing;
// --config-out writes them whole.
func elideGraphs(config string) string {
	return embeddedGraph.ReplaceAllStringFunc(config, func(m string) string {
		return fmt.Sprintf(`graph: "(%d bytes of base64; see --config-out)"`, len(m)-len(`graph: ""`))
	})
}
