package attnrun

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/registry"
	"github.com/attnrun/attnrun/tensorio"
)

// Model is a loaded model, ready to run: attnrun layers (a config, a
// preset, an ONNX file attnrun wrote) or an ONNX graph on the executor.
// Its methods may be called from many goroutines at once.
type Model struct {
	// source names where the model came from, for errors.
	source string
	// Exactly one of layers and graph is set.
	layers *models.Model
	// lifted lists the outputs of a model of layers: its output, and for a
	// file attnrun wrote, the attention weights the file also returns.
	lifted []lift.Output
	graph  *exec.Graph
	// inputs and outputs are the names, in order.
	inputs, outputs []string
}

// Name is the model's name: the config's name, or the ONNX file's path
// when it runs on the executor.
func (m *Model) Name() string {
	if m.layers != nil {
		return m.layers.Name()
	}
	return m.source
}

// Inputs names the tensors Forward takes, in order.
func (m *Model) Inputs() []string { return slices.Clone(m.inputs) }

// Outputs names the tensors ForwardAll returns, in order; Forward returns
// the first.
func (m *Model) Outputs() []string { return slices.Clone(m.outputs) }

// Layers returns the model of attnrun layers underneath, for what this
// package does not cover (incremental decoding, FLOP profiles), or nil
// when the model is an ONNX graph on the executor.
func (m *Model) Layers() *models.Model { return m.layers }

// Warnings lists what an ONNX file on the executor does that the ONNX
// standard forbids but ONNX Runtime accepts, and attnrun accepted in the
// same way (see exec.Graph.Warnings). Programs should show them.
func (m *Model) Warnings() []string {
	if m.graph == nil {
		return nil
	}
	return m.graph.Warnings()
}

// Forward runs the model on its inputs, one per name of Inputs, and
// returns its first output: a config's output layer, or an ONNX file's
// first graph output. Inputs of float64 are converted to float32 where
// the model computes in float32; token ids and other inputs a config
// declares int64 are int64 (int32 is widened). ctx bounds the run: once it is done,
// Forward stops between layers or nodes (and inside long kernels) and
// returns ctx.Err(), wrapped.
func (m *Model) Forward(ctx context.Context, inputs ...*tensor.Dense) (*tensor.Dense, error) {
	outs, err := m.run(ctx, nil, inputs)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// ForwardAll is Forward returning every output, in the order of Outputs.
func (m *Model) ForwardAll(ctx context.Context, inputs ...*tensor.Dense) ([]*tensor.Dense, error) {
	return m.run(ctx, nil, inputs)
}

// LayerWeights are the attention weights one layer computed in a pass.
type LayerWeights struct {
	// Layer is the name of the layer in the model's config ("attn").
	Layer string
	// Weights are (B, H, Tq, Tk): for every sequence, head and query, the
	// weights that multiply the values, after the mask and the softmax.
	Weights *tensor.Dense
}

// AttentionWeights runs the model on its inputs, as Forward does, and
// returns the attention weights of every attention layer in the order the
// layers computed them. Only models of attnrun layers report weights; an
// ONNX graph on the executor is an error (attnrun import lifts a PyTorch
// export into layers).
func (m *Model) AttentionWeights(ctx context.Context, inputs ...*tensor.Dense) ([]LayerWeights, error) {
	if m.graph != nil {
		return nil, fmt.Errorf("%s runs on the ONNX executor, which reports no attention weights; `attnrun import` lifts a PyTorch export into attnrun layers, which do", m.source)
	}
	var mu sync.Mutex // layers report from the pass's goroutine, but need not
	var weights []LayerWeights
	hook := func(layer string, w *tensor.Dense) {
		mu.Lock()
		defer mu.Unlock()
		weights = append(weights, LayerWeights{Layer: layer, Weights: w})
	}
	if _, err := m.run(ctx, hook, inputs); err != nil {
		return nil, err
	}
	return weights, nil
}

// StateDict returns the parameters of a model of attnrun layers under
// PyTorch's state_dict names, in model order, as copies: the arguments
// tensorio.WriteNPZ and tensorio.WriteSafetensors take. An ONNX graph on
// the executor has initializers, not parameters, and is an error.
func (m *Model) StateDict() (names []string, tensors []*tensor.Dense, err error) {
	if m.graph != nil {
		return nil, nil, fmt.Errorf("%s runs on the ONNX executor: its weights are graph initializers, not parameters; `attnrun import` lifts a PyTorch export into layers with a state dict", m.source)
	}
	names, dict := m.layers.StateDict()
	tensors = make([]*tensor.Dense, len(names))
	for i, name := range names {
		tensors[i] = dict[name]
	}
	return names, tensors, nil
}

// run executes the model and returns every output; hook, if set,
// receives the attention weights of a model of layers.
func (m *Model) run(ctx context.Context, hook func(string, *tensor.Dense), inputs []*tensor.Dense) ([]*tensor.Dense, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if len(inputs) != len(m.inputs) {
		return nil, fmt.Errorf("model %q takes %d input(s) (%s), got %d",
			m.Name(), len(m.inputs), strings.Join(m.inputs, ", "), len(inputs))
	}
	for i, x := range inputs {
		if x == nil {
			return nil, fmt.Errorf("model %q: input %q is nil", m.Name(), m.inputs[i])
		}
	}
	if m.graph != nil {
		return m.runGraph(ctx, inputs)
	}
	if !m.layers.HasWeights() {
		return nil, fmt.Errorf("model %q (%s) has no weights: load it with attnrun.WithWeights(path) or attnrun.WithSeed(seed)",
			m.Name(), m.source)
	}
	args := make([]*tensor.Dense, len(inputs))
	for i, x := range inputs {
		var err error
		if m.layers.Config().InputDtype(i) == tensor.Int64 {
			args[i], err = int64Input(x)
		} else {
			args[i], err = float32Input(x)
		}
		if err != nil {
			return nil, fmt.Errorf("model %q: input %q: %w", m.Name(), m.inputs[i], err)
		}
	}
	run := &registry.Run{Context: ctx, Hook: hook}
	if !wantsWeights(m.lifted) {
		y, err := m.layers.Forward(run, args...)
		if err != nil {
			return nil, err
		}
		outs := make([]*tensor.Dense, len(m.lifted))
		for i := range outs {
			outs[i] = y
		}
		return outs, nil
	}
	return lift.RunOutputs(m.layers, m.lifted, run, args)
}

// wantsWeights reports whether a file's outputs include attention weights,
// which only a hooked pass computes, or KV caches, which only a session
// holds: lift.RunOutputs computes them.
func wantsWeights(outputs []lift.Output) bool {
	for _, o := range outputs {
		if o.Weights != "" || o.Cache != "" {
			return true
		}
	}
	return false
}

// runGraph feeds the inputs to the executor by name, converting float64
// to float32 where the graph declares float32.
func (m *Model) runGraph(ctx context.Context, inputs []*tensor.Dense) ([]*tensor.Dense, error) {
	feeds := make(map[string]*tensor.Dense, len(inputs))
	for i, info := range m.graph.Inputs() {
		x := inputs[i]
		if info.DType == exec.Float32 && x.Dtype() == tensor.Float64 {
			var err error
			if x, err = tensorio.ToFloat32(x); err != nil {
				return nil, fmt.Errorf("%s: input %q: %w", m.source, info.Name, err)
			}
		}
		feeds[info.Name] = x
	}
	outs, err := m.graph.RunContext(ctx, feeds)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.source, err)
	}
	res := make([]*tensor.Dense, len(m.outputs))
	for i, name := range m.outputs {
		res[i] = outs[name]
	}
	return res, nil
}

// float32Input returns a layer input as a dense float32 tensor: float32
// as is (a strided view copied), float64 rounded to nearest.
func float32Input(x *tensor.Dense) (*tensor.Dense, error) {
	switch x.Dtype() {
	case tensor.Float32:
		return contiguous(x)
	case tensor.Float64:
		return tensorio.ToFloat32(x)
	}
	return nil, fmt.Errorf("dtype %v, want float32 or float64", x.Dtype())
}

// int64Input returns a layer input the config declares int64 (token ids,
// masks, positions) as a dense int64 tensor: int64 as is (a strided view
// copied), int32 widened.
func int64Input(x *tensor.Dense) (*tensor.Dense, error) {
	switch x.Dtype() {
	case tensor.Int64:
		return contiguous(x)
	case tensor.Int32:
		narrow, ok := x.Data().([]int32)
		if !ok || x.RequiresIterator() {
			return nil, fmt.Errorf("int32 of shape %v: want a contiguous tensor of token ids", models.FormatShape(x.Shape()))
		}
		wide := make([]int64, len(narrow))
		for i, v := range narrow {
			wide[i] = int64(v)
		}
		return tensor.New(tensor.WithShape(x.Shape().Clone()...), tensor.WithBacking(wide)), nil
	}
	return nil, fmt.Errorf("dtype %v, want int64 (or int32)", x.Dtype())
}

// contiguous returns x, or a row-major copy of x when it is a strided view.
func contiguous(x *tensor.Dense) (*tensor.Dense, error) {
	if !x.RequiresIterator() {
		return x, nil
	}
	if dense, ok := x.Materialize().(*tensor.Dense); ok {
		return dense, nil
	}
	return nil, fmt.Errorf("a strided view of shape %v could not be copied", models.FormatShape(x.Shape()))
}
