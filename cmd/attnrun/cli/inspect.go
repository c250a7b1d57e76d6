package cli

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

func newInspectCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE.onnx",
		Short: "Describe an ONNX file: producer, opsets, inputs, outputs, ops, weights",
		Long: `inspect prints what an ONNX file holds: its producer and opsets, its inputs
and outputs with their (possibly symbolic) shapes, how often each op occurs,
and every initializer with its shape and size; then the attnrun layers the
graph lifts to (what attnrun import would build), or which nodes cannot be
lifted and why. A file attnrun wrote shows the layers of its metadata.`,
		Example: "  attnrun inspect testdata/onnx/multihead_opset17_dynamic/model.onnx",
		Args:    oneArg("an ONNX file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := onnxio.ReadModel(args[0])
			if err != nil {
				return err
			}
			describeModel(cmd.OutOrStdout(), args[0], m)
			describeLift(cmd.OutOrStdout(), m)
			return nil
		},
	}
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
	total := 0
	for _, t := range g.GetInitializer() {
		size := tensorBytes(t)
		total += size
		fmt.Fprintf(w, "  %s\t%s\t%v\t%s\n", t.GetName(), onnxio.DataType(t.GetDataType()), t.GetDims(), humanBytes(size))
	}
	fmt.Fprintf(w, "  total\t\t\t%s\n", humanBytes(total))
}

// describeLift shows which attnrun layers a file lifts to, or why not.
func describeLift(out io.Writer, m *onnxpb.ModelProto) {
	fmt.Fprintln(out, "\nattnrun layers")
	res, err := lift.Lift(m)
	var unlifted *lift.UnliftedError
	switch {
	case errors.As(err, &unlifted):
		fmt.Fprintln(out, "  cannot be lifted completely (attnrun import --partial keeps these as ONNX subgraphs):")
		printUnlifted(out, unlifted.Nodes)
		return
	case err != nil:
		fmt.Fprintf(out, "  cannot be lifted: %v\n", err)
		return
	}
	if res.Attnrun {
		fmt.Fprintf(out, "  written by attnrun: model %q, rebuilt from its metadata\n", res.Model.Name())
	} else {
		fmt.Fprintf(out, "  lifts to model %q (checked against the graph: max abs diff %.3g)\n", res.Model.Name(), res.Check.MaxAbs)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer w.Flush()
	for _, l := range res.Model.Layers() {
		fmt.Fprintf(w, "  %s\t%s\treads %s\n", l.Name, l.Type, strings.Join(l.Inputs, ", "))
	}
}

func shapeOfInfo(vi *onnxpb.ValueInfoProto) string {
	if !onnxio.HasShape(vi) {
		return "[?]"
	}
	return onnxio.FormatDims(onnxio.Dims(vi))
}

func tensorBytes(t *onnxpb.TensorProto) int {
	n := 1
	for _, d := range t.GetDims() {
		n *= int(d)
	}
	return n * max(onnxio.ElemBytes(onnxio.DataType(t.GetDataType())), 1)
}

func humanBytes(n int) string {
	switch {
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
