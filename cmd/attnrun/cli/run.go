package cli

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/spf13/cobra"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/tensorfmt"
	"github.com/attnrun/attnrun/internal/torchrand"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/registry"
	"github.com/attnrun/attnrun/tensorio"
)

type runFlags struct {
	weights string
	inputs  []string
	outputs []string
	// randomInputs are the shapes of --random-input, one per model input.
	randomInputs []string
	seed         uint64
	train        bool
	attention    string
	executor     bool
	// incremental is the number of tokens per step of a token-by-token
	// run; 0 runs the whole sequence at once.
	incremental int
}

func newRunCommand() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run MODEL.yaml|PRESET|FILE.onnx [--input X.npy | --random-input B,T,D] [--weights W.npz] [-o Y.npy]",
		Short: "Run a model, preset or ONNX file and print or save its output",
		Example: `  attnrun run seed-mha-wrapper                        # a preset, on its own input
  attnrun run model.yaml --seed 1 --random-input 1,6,3  # random weights and input
  attnrun run model.yaml --weights w.npz --input x.npy -o y.npy
  attnrun run model.onnx --input x.npy                 # ONNX: one --input per graph input
  attnrun run seed-self-attention-v2 --attention attn  # a layer's attention weights
  attnrun run model.yaml --weights w.npz --input inputs/ -o outputs/   # every .npy of a folder
  attnrun run llama-block.yaml --seed 1 --input x.npy --incremental=4  # 4 tokens per step`,
		Long: `Weights come from --weights (.npz, .safetensors, or an ONNX file attnrun
wrote), else the preset's or the ONNX file's own, else PyTorch's initialization
drawn with --seed (a config attnrun import lifted needs --weights or --seed).
The output prints as PyTorch prints tensors, or goes to -o (.npy; .pb for ONNX
outputs). A preset runs on its example input; --random-input draws
torch.randn of a shape after torch.manual_seed(--seed).

--input DIR or X.npz runs once per tensor in it, writing -o DIR or -o Y.npz,
with a progress bar on a terminal.
--attention LAYER prints that layer's weights (B, H, Tq, Tk) instead of the
output; on an ONNX graph LAYER is a Softmax node or its scope, or an
Attention op. --incremental[=N] feeds the tokens N at a time through the KV
caches (causal models, and files attnrun wrote: a lifted decoder resumes
from its past_key_values inputs); write the value after '='. A file attnrun wrote runs
on attnrun's layers unless --executor is given. Exit status: 0 ok, 1 error,
2 misuse.`,
		Args: oneArg("a model config, preset name or ONNX file"),
	}
	lim := addLimitFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return lim.run(func() error { return runModel(cmd, args[0], f, lim) })
	}
	fl := cmd.Flags()
	fl.StringVar(&f.weights, "weights", "", "state dict with the model's parameters: .npz, .safetensors, or an ONNX file attnrun wrote")
	fl.StringArrayVar(&f.inputs, "input", nil, "input tensor (.npy; .pb TensorProto for ONNX); repeat for several inputs, in order; a directory or .npz runs each tensor in it")
	fl.StringArrayVar(&f.randomInputs, "random-input", nil, "run on torch.randn of this shape, e.g. 1,6,3 (seeded by --seed); repeat for several inputs")
	fl.StringArrayVarP(&f.outputs, "output", "o", nil, "write the result to this .npy file instead of printing it (ONNX: one per graph output); a directory or .npz for many inputs")
	fl.Uint64Var(&f.seed, "seed", 0, "seed for weight initialization and dropout")
	fl.BoolVar(&f.train, "train", false, "train mode: dropout is active")
	fl.StringVar(&f.attention, "attention", "", "print this layer's attention weights instead of the output (ONNX graphs: a Softmax node, its module scope, or an Attention op)")
	fl.BoolVar(&f.executor, "executor", false, "run a file attnrun wrote on its ONNX graph, not on attnrun's layers")
	fl.IntVar(&f.incremental, "incremental", 0, "run token by token through the KV caches, N tokens per step (--incremental=N; alone: 1)")
	fl.Lookup("incremental").NoOptDefVal = "1"
	return cmd
}

func runModel(cmd *cobra.Command, target string, f runFlags, lim *limits) error {
	if err := f.check(cmd, target); err != nil {
		return err
	}
	batch, isBatch := batchInput(f.inputs)
	if isONNX(target) {
		if isBatch {
			return runONNXBatch(cmd, target, batch, f, lim)
		}
		return runONNX(cmd.OutOrStdout(), cmd.ErrOrStderr(), lim, target, f)
	}
	if len(f.outputs) > 1 {
		return usageError{fmt.Errorf("a model has one output, got %d --output", len(f.outputs))}
	}
	src, err := openSourceWith(lim, target, sourceOptions{weights: f.weights, seed: f.seed, seedGiven: cmd.Flags().Changed("seed")})
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
	if len(f.randomInputs) > 0 {
		inputs, err = f.randomTensors()
		if err == nil {
			err = src.checkInputCount(len(inputs), "--random-input")
		}
	}
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
	fmt.Fprintln(cmd.OutOrStdout(), tensorfmt.Dense(out))
	return nil
}

// check rejects flags that do not go together, and files given to flags
// that do not take them, before any work is done.
func (f runFlags) check(cmd *cobra.Command, target string) error {
	if err := f.checkIncremental(cmd, target); err != nil {
		return err
	}
	for _, in := range f.inputs {
		if err := checkFileFlag("input", in, kindNPY, kindTensorProto, kindNPZ, kindDir); err != nil {
			return err
		}
	}
	if f.weights != "" && isONNX(target) {
		return usageError{fmt.Errorf("--weights %s: %s carries its own weights (--weights applies to configs and presets)", f.weights, target)}
	}
	if f.weights != "" {
		if err := checkFileFlag("weights", f.weights, kindNPZ, kindSafetensors, kindONNX); err != nil {
			return err
		}
	}
	if len(f.randomInputs) > 0 && len(f.inputs) > 0 && !isONNX(target) {
		return usageError{errors.New("--random-input and --input do not combine for a model: give one or the other")}
	}
	batch, isBatch := batchInput(f.inputs)
	if !isBatch {
		return nil
	}
	switch {
	case len(f.randomInputs) > 0:
		return usageError{fmt.Errorf("--random-input does not combine with --input %s, which runs many inputs", batch)}
	case f.attention != "" && isONNX(target):
		return usageError{fmt.Errorf("--attention on an ONNX file takes one input set, not --input %s", batch)}
	case len(f.outputs) > 1:
		return usageError{fmt.Errorf("a run over %s takes one --output (a directory or .npz), got %d", batch, len(f.outputs))}
	case len(f.outputs) == 1:
		return checkBatchDest(batch, f.outputs[0])
	}
	return nil
}

// randomTensors draws the --random-input tensors in order from one
// generator seeded with --seed, as torch.randn calls after
// torch.manual_seed(seed) would.
func (f runFlags) randomTensors() ([]*tensor.Dense, error) {
	g := torchrand.New(f.seed)
	out := make([]*tensor.Dense, len(f.randomInputs))
	for i, spec := range f.randomInputs {
		x, err := torchRandn(spec, f.seed, g)
		if err != nil {
			return nil, fmt.Errorf("--random-input: %w", err)
		}
		out[i] = x
	}
	return out, nil
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
	items, err := listBatch(src.lim, batch)
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
	items, err := listBatch(lim, batch)
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

// inputs reads the --input files, or the preset's example input.
func (s *source) inputs(paths []string) ([]*tensor.Dense, error) {
	want := len(s.model.Config().Inputs)
	if len(paths) == 0 {
		if s.preset == nil {
			return nil, usageError{fmt.Errorf("model %q needs --input (%d .npy file(s): %s), or --random-input B,T,D for random ones (attnrun input B,T,D -o x.npy writes one)",
				s.model.Name(), want, strings.Join(s.model.Config().Inputs, ", "))}
		}
		x, err := s.preset.Input()
		if err != nil {
			return nil, err
		}
		return []*tensor.Dense{x}, nil
	}
	if err := s.checkInputCount(len(paths), "--input"); err != nil {
		return nil, err
	}
	out := make([]*tensor.Dense, len(paths))
	for i, p := range paths {
		t, err := s.lim.files().ReadNPYFile(p)
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

// checkInputCount refuses a number of inputs the model does not take.
func (s *source) checkInputCount(n int, flag string) error {
	names := s.model.Config().Inputs
	if n != len(names) {
		return usageError{fmt.Errorf("model %q takes %d input(s) (%s), got %d %s",
			s.model.Name(), len(names), strings.Join(names, ", "), n, flag)}
	}
	return nil
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
