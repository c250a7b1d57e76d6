package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/tensorio"
)

type exportFlags struct {
	weights   string
	seed      uint64
	output    string
	opset     int
	stateDict string
	seedGiven bool
}

func newExportCommand() *cobra.Command {
	var f exportFlags
	cmd := &cobra.Command{
		Use:   "export MODEL.yaml|PRESET (-o OUT.onnx | --state-dict OUT.npz|OUT.safetensors)",
		Short: "Export a model to ONNX, or its weights as a PyTorch state dict",
		Long: fmt.Sprintf(`export builds the model (a YAML config or a built-in preset) with its weights
(--weights, else the preset's embedded weights, else a seeded PyTorch-style
initialization, --seed) and writes it:

  -o OUT.onnx      an ONNX graph of standard ops (opset %d to %d, default %d)
                   that ONNX Runtime runs with attnrun's numbers. Inputs keep
                   the model's names, shaped (batch, seq, d) with batch and seq
                   dynamic: feed a (T, d) input as (1, T, d). The output is "y".
                   Initializers are the parameters under their state_dict
                   names; metadata_props carry the YAML config, so that
                   attnrun import restores the model exactly. Dropout is
                   exported as at inference.
  --state-dict F   the weights alone, keys = parameter names, as .npz
                   (numpy.savez) or .safetensors, ready for PyTorch's
                   load_state_dict.

Both may be given at once. Every layer of the model must support ONNX export
(all built-in layers do); the error names the one that does not. Files are
written atomically.`, export.MinOpset, export.MaxOpset, export.DefaultOpset),
		Example: `  attnrun export seed-mha-wrapper -o mha.onnx
  attnrun export model.yaml --weights w.safetensors -o model.onnx --opset 13
  attnrun export model.yaml --seed 123 --state-dict w.npz
  attnrun export seed-bishop-multihead -o mh.onnx --state-dict mh.safetensors`,
		Args: oneArg("a model config or preset name"),
	}
	lim := addLimitFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := f.check(cmd); err != nil {
			return err
		}
		f.seedGiven = cmd.Flags().Changed("seed")
		return lim.run(func() error { return exportModel(cmd.OutOrStdout(), lim, args[0], f) })
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.output, "output", "o", "", "write the ONNX model to this .onnx file")
	fl.IntVar(&f.opset, "opset", export.DefaultOpset, fmt.Sprintf("ONNX opset to target, %d to %d", export.MinOpset, export.MaxOpset))
	fl.StringVar(&f.stateDict, "state-dict", "", "write the weights to this .npz or .safetensors file")
	fl.StringVar(&f.weights, "weights", "", "state dict (.npz or .safetensors) with the model's parameters")
	fl.Uint64Var(&f.seed, "seed", 0, "seed for weight initialization (configs without --weights)")
	return cmd
}

// check reports misuse before any work is done.
func (f exportFlags) check(cmd *cobra.Command) error {
	if f.output == "" && f.stateDict == "" {
		return usageError{fmt.Errorf("export needs -o OUT.onnx or --state-dict OUT.npz|OUT.safetensors")}
	}
	if f.output != "" && !hasONNXExt(f.output) {
		return usageError{fmt.Errorf("-o %s: the ONNX file name must end in .onnx", f.output)}
	}
	if cmd.Flags().Changed("opset") {
		if f.output == "" {
			return usageError{fmt.Errorf("--opset applies to the ONNX file: give -o OUT.onnx")}
		}
		if f.opset < export.MinOpset || f.opset > export.MaxOpset {
			return usageError{fmt.Errorf("--opset %d: attnrun exports opsets %d to %d", f.opset, export.MinOpset, export.MaxOpset)}
		}
	}
	if f.weights != "" {
		if err := checkFileFlag("weights", f.weights, kindNPZ, kindSafetensors, kindONNX); err != nil {
			return err
		}
	}
	return checkStateDictName(f.stateDict)
}

func exportModel(stdout io.Writer, lim *limits, target string, f exportFlags) error {
	src, err := openSourceWith(lim, target, sourceOptions{weights: f.weights, seed: f.seed, seedGiven: f.seedGiven})
	if err != nil {
		return err
	}
	if f.output != "" {
		if err := exportONNX(stdout, src, f.output, f.opset); err != nil {
			return err
		}
	}
	if f.stateDict != "" {
		return exportStateDict(stdout, src.model, f.stateDict)
	}
	return nil
}

// exportONNX writes the model as ONNX. A preset's input width comes from
// its example input; a config's from its parameters (Export finds it).
func exportONNX(stdout io.Writer, src *source, path string, opset int) error {
	opts := export.Options{Opset: opset}
	if src.preset != nil {
		x, err := src.preset.Input()
		if err != nil {
			return err
		}
		opts.Widths = map[string]int{src.model.Config().Inputs[0]: x.Shape()[x.Dims()-1]}
	}
	m, err := export.Model(src.model, opts)
	if err != nil {
		return err
	}
	if err := onnxio.WriteModel(path, m); err != nil {
		return err
	}
	g := m.GetGraph()
	var shapes []string
	for _, vi := range append(g.GetInput(), g.GetOutput()...) {
		shapes = append(shapes, vi.GetName()+" "+onnxio.FormatDims(onnxio.Dims(vi)))
	}
	fmt.Fprintf(stdout, "wrote %s: model %q, opset %d, %d nodes, %d initializers; %s\n",
		path, src.model.Name(), opset, len(g.GetNode()), len(g.GetInitializer()), strings.Join(shapes, ", "))
	return nil
}

// stateDictWriters writes a state dict by file extension.
var stateDictWriters = map[string]func(path string, names []string, tensors []*tensor.Dense) error{
	".npz": tensorio.WriteNPZ,
	".safetensors": func(path string, names []string, tensors []*tensor.Dense) error {
		// "format": "pt" is what safetensors' PyTorch helpers write and
		// what transformers looks for.
		return tensorio.WriteSafetensors(path, names, tensors, map[string]string{"format": "pt"})
	},
}

// exportStateDict writes the model's parameters under their names,
// straight from the model's storage.
func exportStateDict(stdout io.Writer, m *models.Model, path string) error {
	if err := writeStateDict(path, m); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d parameters of model %q (%d values)\n", path, len(m.Params()), m.Name(), m.NumParams())
	return nil
}

// writeStateDict writes a model's parameters as .npz or .safetensors, by
// the file's extension.
func writeStateDict(path string, m *models.Model) error {
	names := make([]string, len(m.Params()))
	tensors := make([]*tensor.Dense, len(m.Params()))
	for i, p := range m.Params() {
		names[i], tensors[i] = p.Name, p.Value
	}
	return stateDictWriters[strings.ToLower(filepath.Ext(path))](path, names, tensors)
}

// checkStateDictName refuses a --state-dict name of no format attnrun
// writes.
func checkStateDictName(path string) error {
	if path == "" {
		return nil
	}
	if _, ok := stateDictWriters[strings.ToLower(filepath.Ext(path))]; !ok {
		return usageError{fmt.Errorf("--state-dict %s: unknown format (want .npz or .safetensors)", path)}
	}
	return nil
}
