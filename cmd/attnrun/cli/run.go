package cli

import (
	"errors"
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
	// incremental is the number of tokens per step of a token-by-token
	// run; 0 runs the whole sequence at once.
	incremental int
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
(B, H, Tq, Tk) with leading axes of size 1 dropped, instead of the output.

Many inputs: --input DIR runs the model once per .npy (or .pb) file of DIR,
in name order, and --input X.npz once per array of the archive. The outputs
are printed under the inputs' names, or written with --output DIR (one .npy
per input, with the input's name) or --output Y.npz (one array per input,
with the input's key). A terminal shows a progress bar on stderr; a summary
line (inputs, time, failures) ends the run. An input that fails is reported
and the others still run; the exit status is then 1.

--incremental runs the model token by token, as a decoder does: it feeds
the first input's tokens one at a time (--incremental=N: N at a time)
through every layer's KV cache (models.Decode) and joins the outputs, which
equal the full pass. Every layer must be causal attention, a position
layer or a token-wise layer; the error names the first that is not. It
prints the output even for presets that show attention weights, and it
does not combine with --attention (each step sees only its rows of the
weights). ONNX files run whole.`,
		Example: `  attnrun run seed-mha-wrapper
  attnrun run seed-masked-weights            # prints attention weights
  attnrun run model.yaml --weights w.npz --input x.npy --output y.npy
  attnrun run seed-self-attention-v2 --attention attn
  attnrun run model.onnx --input x.npy
  attnrun run model.yaml --input inputs/ --output outputs/   # every .npy of inputs/
  attnrun run seed-mha-wrapper --input batch.npz --output out.npz
  attnrun run seed-mha-wrapper --incremental                 # token by token
  attnrun run llama-block.yaml --input x.npy --incremental=4 # 4 tokens per step`,
		Args: oneArg("a model config or preset name"),
	}
	lim := addLimitFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return lim.run(func() error { return runModel(cmd, args[0], f, lim) })
	}
	fl := cmd.Flags()
	fl.StringVar(&f.weights, "weights", "", "state dict (.npz or .safetensors) with the model's parameters")
	fl.StringArrayVar(&f.inputs, "input", nil, "input tensor (.npy; .pb TensorProto for ONNX); repeat for several inputs, in order; a directory or .npz runs each tensor in it")
	fl.StringArrayVarP(&f.outputs, "output", "o", nil, "write the result to this .npy file instead of printing it (ONNX: one per graph output); a directory or .npz for many inputs")
	fl.Uint64Var(&f.seed, "seed", 0, "seed for weight initialization and dropout")
	fl.BoolVar(&f.train, "train", false, "train mode: dropout is active")
	fl.StringVar(&f.attention, "attention", "", "print this layer's attention weights instead of the output")
	fl.BoolVar(&f.executor, "executor", false, "run a file attnrun wrote on its ONNX graph, not on attnrun's layers")
	fl.IntVar(&f.incremental, "incremental", 0, "run token by token through the KV caches, N tokens per step (--incremental=N; alone: 1)")
	fl.Lookup("incremental").NoOptDefVal = "1"
	return cmd
}

func runModel(cmd *cobra.Command, target string, f runFlags, lim *limits) error {
	if err := f.checkIncremental(cmd, target); err != nil {
		return err
	}
	batch, isBatch := batchInput(f.inputs)
	if isBatch && len(f.outputs) > 1 {
		return usageError{fmt.Errorf("a run over %s takes one --output (a directory or .npz), got %d", batch, len(f.outputs))}
	}
	if isONNX(target) {
		if isBatch {
			return runONNXBatch(cmd, target, batch, f, lim)
		}
		return runONNX(cmd.OutOrStdout(), cmd.ErrOrStderr(), lim, target, f.executor, f.inputs, f.outputs)
	}
	if len(f.outputs) > 1 {
		return usageError{fmt.Errorf("a model has one output, got %d --output", len(f.outputs))}
	}
	src, err := openSource(lim, target, f.weights, f.seed)
	if err != nil {
		return err
	}
	if f.incremental > 0 {
		if err := src.model.CheckIncremental(); err != nil {
			return fmt.Errorf("--incremental: %w", err)
		}
	}
	attention := f.attention
	if !cmd.Flags().Changed("attention") && src.preset != nil && f.incremental == 0 {
		attention = src.preset.Attention
	}
	run := &registry.Run{Context: lim.ctx, Train: f.train, RNG: rand.New(rand.NewPCG(f.seed, 0x5eed))}
	if isBatch {
		return runModelBatch(cmd, src, batch, f, func(inputs []*tensor.Dense) (*tensor.Dense, error) {
			return compute(src, run, inputs, attention, f.incremental)
		})
	}
	inputs, err := src.inputs(f.inputs)
	if err != nil {
		return err
	}
	out, err := compute(src, run, inputs, attention, f.incremental)
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	if len(f.outputs) == 1 {
		return tensorio.WriteNPYFile(f.outputs[0], out)
	}
	fmt.Fprintln(cmd.OutOrStdout(), formatTensor(out.Data().([]float32), out.Shape()))
	return nil
}

// checkIncremental rejects --incremental where it has no meaning.
func (f runFlags) checkIncremental(cmd *cobra.Command, target string) error {
	if !cmd.Flags().Changed("incremental") {
		return nil
	}
	switch {
	case f.incremental <= 0:
		return usageError{fmt.Errorf("--incremental=%d: the tokens per step must be positive", f.incremental)}
	case f.attention != "":
		return usageError{errors.New("--incremental and --attention do not combine: each step sees only its own rows of the weights (run without --incremental to print them)")}
	case isONNX(target):
		return usageError{errors.New("--incremental runs attnrun models (a config or preset), not ONNX files; attnrun import --config-out gives the config of a file attnrun can lift")}
	}
	return nil
}

// compute runs the model on its inputs: the whole sequence at once, or
// chunk tokens at a time through the layers' caches when chunk > 0.
func compute(src *source, run *registry.Run, inputs []*tensor.Dense, attention string, chunk int) (*tensor.Dense, error) {
	if chunk > 0 {
		return src.model.Decode(run, chunk, inputs...)
	}
	return forward(src, run, inputs, attention)
}

// runModelBatch runs a single-input model once per tensor of a directory
// or archive.
func runModelBatch(cmd *cobra.Command, src *source, batch string, f runFlags, run func([]*tensor.Dense) (*tensor.Dense, error)) error {
	if names := src.model.Config().Inputs; len(names) != 1 {
		return usageError{fmt.Errorf("--input %s runs a model of one input; model %q takes %d (%s)",
			batch, src.model.Name(), len(names), strings.Join(names, ", "))}
	}
	items, err := listBatch(batch)
	if err != nil {
		return err
	}
	sink, err := newBatchSink(cmd.OutOrStdout(), batch, firstOr(f.outputs, ""), []string{src.model.Config().Output})
	if err != nil {
		return err
	}
	return runBatch(cmd.ErrOrStderr(), items, sink, func(x *tensor.Dense) ([]*tensor.Dense, error) {
		x, err := floatInput(x)
		if err != nil {
			return nil, err
		}
		out, err := run([]*tensor.Dense{x})
		if err != nil {
			return nil, err
		}
		return []*tensor.Dense{out}, nil
	})
}

// runONNXBatch runs a single-input ONNX file once per tensor of a
// directory or archive.
func runONNXBatch(cmd *cobra.Command, path, batch string, f runFlags, lim *limits) error {
	file, err := openONNX(cmd.ErrOrStderr(), lim, path, f.executor)
	if err != nil {
		return err
	}
	if file.numInputs() != 1 {
		return usageError{fmt.Errorf("--input %s runs a file of one input; %s takes %d (%s)", batch, path, file.numInputs(), file.inputNames())}
	}
	items, err := listBatch(batch)
	if err != nil {
		return err
	}
	sink, err := newBatchSink(cmd.OutOrStdout(), batch, firstOr(f.outputs, ""), file.outputNames())
	if err != nil {
		return err
	}
	return runBatch(cmd.ErrOrStderr(), items, sink, func(x *tensor.Dense) ([]*tensor.Dense, error) {
		return file.run([]*tensor.Dense{x})
	})
}

func firstOr(values []string, def string) string {
	if len(values) == 0 {
		return def
	}
	return values[0]
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
	return forward(src, &registry.Run{Context: src.lim.ctx}, inputs, src.preset.Attention)
}

// source is what run, check and export work on: a model with its weights,
// and the preset it came from, if any.
type source struct {
	model  *models.Model
	preset *models.Preset
	// lim are the command's limits, which the model was built within.
	lim *limits
}

// openSource resolves MODEL.yaml or a preset name and loads weights:
// --weights first, then the preset's own, then a seeded initialization.
func openSource(lim *limits, target, weights string, seed uint64) (*source, error) {
	src := source{lim: lim}
	var err error
	if isConfigPath(target) {
		src.model, err = lim.models().Load(target)
	} else {
		src.preset, err = models.LookupPreset(target)
		if err == nil {
			src.model, err = src.preset.ModelWith(lim.models())
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
		if s.model.Config().InputDtype(i) == tensor.Int64 { // token ids, positions, an integer mask
			if t.Dtype() != tensor.Int64 {
				return nil, fmt.Errorf("%s: input has dtype %v; model %q declares %q int64", p, t.Dtype(), s.model.Name(), s.model.Config().Inputs[i])
			}
			out[i] = t
			continue
		}
		if out[i], err = floatInput(t); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return out, nil
}

// floatInput checks that a model input is float32 or float64 and returns
// it as float32.
func floatInput(t *tensor.Dense) (*tensor.Dense, error) {
	if t.Dtype() != tensor.Float32 && t.Dtype() != tensor.Float64 {
		return nil, fmt.Errorf("input has dtype %v, want float32 or float64", t.Dtype())
	}
	return tensorio.ToFloat32(t)
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
