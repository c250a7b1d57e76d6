package cli

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/registry"
	"github.com/attnrun/attnrun/tensorio"
)

type runFlags struct {
	weights   string
	inputs    []string
	outputs   []string
	seed      uint64
	train     bool
	attention string
	executor  bool
}

func newRunCommand() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run MODEL.yaml|PRESET|FILE.onnx",
		Short: "Run a model or preset and print or save its output",
		Long: `run builds the model (a YAML config or a built-in preset), loads its weights
(--weights, else the preset's embedded weights, else a seeded PyTorch-style
initialization), runs it in eval mode (--train enables dropout) and prints the
output as PyTorch prints tensors, or writes it with --output.

A preset runs on its embedded example input unless --input is given. An ONNX
file runs on attnrun's graph executor, with one --input per graph input; a
file attnrun wrote (attnrun export, attnrun import) runs on attnrun's layers,
rebuilt from its metadata, unless --executor is given. With
--attention LAYER the command prints that layer's attention weights, shaped
(B, H, Tq, Tk) with leading axes of size 1 dropped, instead of the output.`,
		Example: `  attnrun run seed-mha-wrapper
  attnrun run seed-masked-weights            # prints attention weights
  attnrun run model.yaml --weights w.npz --input x.npy --output y.npy
  attnrun run seed-self-attention-v2 --attention attn
  attnrun run model.onnx --input x.npy`,
		Args: oneArg("a model config or preset name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runModel(cmd, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.weights, "weights", "", "state dict (.npz or .safetensors) with the model's parameters")
	fl.StringArrayVar(&f.inputs, "input", nil, "input tensor (.npy; .pb TensorProto for ONNX); repeat for several inputs, in order")
	fl.StringArrayVarP(&f.outputs, "output", "o", nil, "write the result to this .npy file instead of printing it (ONNX: one per graph output)")
	fl.Uint64Var(&f.seed, "seed", 0, "seed for weight initialization and dropout")
	fl.BoolVar(&f.train, "train", false, "train mode: dropout is active")
	fl.StringVar(&f.attention, "attention", "", "print this layer's attention weights instead of the output")
	fl.BoolVar(&f.executor, "executor", false, "run a file attnrun wrote on its ONNX graph, not on attnrun's layers")
	return cmd
}

func runModel(cmd *cobra.Command, target string, f runFlags) error {
	if isONNX(target) {
		return runONNX(cmd.OutOrStdout(), target, f.executor, f.inputs, f.outputs)
	}
	if len(f.outputs) > 1 {
		return usageError{fmt.Errorf("a model has one output, got %d --output", len(f.outputs))}
	}
	src, err := openSource(target, f.weights, f.seed)
	if err != nil {
		return err
	}
	inputs, err := src.inputs(f.inputs)
	if err != nil {
		return err
	}
	attention := f.attention
	if !cmd.Flags().Changed("attention") && src.preset != nil {
		attention = src.preset.Attention
	}
	run := &registry.Run{Train: f.train, RNG: rand.New(rand.NewPCG(f.seed, 0x5eed))}
	out, err := forward(src, run, inputs, attention)
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	if len(f.outputs) == 1 {
		return tensorio.WriteNPYFile(f.outputs[0], out)
	}
	fmt.Fprintln(cmd.OutOrStdout(), formatTensor(out.Data().([]float32), out.Shape()))
	return nil
}

// forward runs the model and returns its output, or the attention weights
// of the named layer when attention is set.
func forward(src *source, run *registry.Run, inputs []*tensor.Dense, attention string) (*tensor.Dense, error) {
	var weights *tensor.Dense
	if attention != "" {
		if !hasLayer(src.model, attention) {
			return nil, fmt.Errorf("--attention %q: model %q has no such layer (layers: %s)",
				attention, src.model.Name(), strings.Join(layerNames(src.model), ", "))
		}
		run.Hook = func(layer string, w *tensor.Dense) {
			if layer == attention {
				weights = w
			}
		}
	}
	out, err := src.model.Forward(run, inputs...)
	if err != nil || attention == "" {
		return out, err
	}
	if weights == nil {
		return nil, fmt.Errorf("--attention %q: the layer produced no attention weights (is it an attention layer?)", attention)
	}
	return squeezeLeading(weights), nil
}

// presetResult is what a preset shows on its example input: the output, or
// the attention weights of its Attention layer.
func presetResult(src *source) (*tensor.Dense, error) {
	inputs, err := src.inputs(nil)
	if err != nil {
		return nil, err
	}
	return forward(src, &registry.Run{}, inputs, src.preset.Attention)
}

// source is what run, check and export work on: a model with its weights,
// and the preset it came from, if any.
type source struct {
	model  *models.Model
	preset *models.Preset
}

// openSource resolves MODEL.yaml or a preset name and loads weights:
// --weights first, then the preset's own, then a seeded initialization.
func openSource(target, weights string, seed uint64) (*source, error) {
	var src source
	var err error
	if isConfigPath(target) {
		src.model, err = models.Load(target)
	} else {
		src.preset, err = models.LookupPreset(target)
		if err == nil {
			src.model, err = src.preset.Model()
		}
	}
	if err != nil {
		return nil, err
	}
	switch {
	case weights != "":
		if err := src.model.LoadWeights(weights); err != nil {
			return nil, err
		}
	case src.preset == nil:
		if err := src.model.Init(seed); err != nil {
			return nil, err
		}
	}
	return &src, nil
}

// isConfigPath tells a config file from a preset name: presets have no
// extension and no slash.
func isConfigPath(target string) bool {
	ext := strings.ToLower(filepath.Ext(target))
	if ext == ".yaml" || ext == ".yml" || strings.ContainsRune(target, os.PathSeparator) {
		return true
	}
	_, err := os.Stat(target)
	return err == nil
}

// inputs reads the --input files, or the preset's example input.
func (s *source) inputs(paths []string) ([]*tensor.Dense, error) {
	want := len(s.model.Config().Inputs)
	if len(paths) == 0 {
		if s.preset == nil {
			return nil, usageError{fmt.Errorf("model %q needs --input (%d .npy file(s): %s)",
				s.model.Name(), want, strings.Join(s.model.Config().Inputs, ", "))}
		}
		x, err := s.preset.Input()
		if err != nil {
			return nil, err
		}
		return []*tensor.Dense{x}, nil
	}
	if len(paths) != want {
		return nil, usageError{fmt.Errorf("model %q takes %d input(s) (%s), got %d --input",
			s.model.Name(), want, strings.Join(s.model.Config().Inputs, ", "), len(paths))}
	}
	out := make([]*tensor.Dense, len(paths))
	for i, p := range paths {
		t, err := tensorio.ReadNPYFile(p)
		if err != nil {
			return nil, err
		}
		if t.Dtype() != tensor.Float32 && t.Dtype() != tensor.Float64 {
			return nil, fmt.Errorf("%s: input has dtype %v, want float32 or float64", p, t.Dtype())
		}
		if out[i], err = tensorio.ToFloat32(t); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return out, nil
}

func hasLayer(m *models.Model, name string) bool {
	for _, l := range m.Layers() {
		if l.Name == name {
			return true
		}
	}
	return false
}

func layerNames(m *models.Model) []string {
	var names []string
	for _, l := range m.Layers() {
		names = append(names, l.Name)
	}
	return names
}

// squeezeLeading drops leading axes of size 1 down to a matrix, so that the
// (1, 1, T, T) weights of a single head on an unbatched input print as the
// (T, T) matrix the notebooks show.
func squeezeLeading(t *tensor.Dense) *tensor.Dense {
	shape := t.Shape().Clone()
	for len(shape) > 2 && shape[0] == 1 {
		shape = shape[1:]
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(t.Data()))
}
