// Package models assembles attnrun layers into models from YAML configs,
// gives their parameters PyTorch's names, initializes or loads their weights,
// and runs them. It also holds the presets embedded in the binary.
//
// Layer types come from the registry, where each layer's package registers
// its types when it is imported. A program that builds models of the
// built-in layers imports their package for that effect:
//
//	import _ "github.com/attnrun/attnrun/layers"
//
// (the front package, github.com/attnrun/attnrun, does it for its users);
// without it, every layer type is unknown. A custom layer's package is
// imported the same way.
//
// A model's parameters start at zero: Init, LoadWeights or LoadStateDict
// sets them, and until then Forward refuses to run.
//
// A model config lists named layers; each takes the previous layer's output
// unless it names its inputs, which is how residuals and cross-attention are
// wired:
//
//	name: block
//	layers:
//	  - {name: attn, type: attention.multihead, d_in: 8, d_out: 8, context_length: 16, num_heads: 2}
//	  - {name: residual, type: nn.add, inputs: [x, attn]}
package models

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// Model is an assembled, runnable model. Its weights are set by Init,
// LoadWeights or LoadStateDict; Forward may then be called from many
// goroutines at once.
type Model struct {
	cfg    *Config
	steps  []step
	params []registry.Param
	output int // index into the value slots
	// numArgs is the total length of the steps' input lists.
	numArgs int
	// ties are the parameters layers borrow from others (registry.Tier):
	// each is stored once, under its source's name in params.
	ties []tie
	// weighted records that the parameters hold weights (Init or a state
	// dict set them, or there are none): until then they are all zero, and
	// a forward pass would compute plausible-looking nonsense.
	weighted bool
}

// step is one layer with its inputs resolved to value slots: slots
// 0..len(Inputs)-1 hold the model inputs, then one slot per layer.
type step struct {
	spec   *LayerSpec
	inputs []int
}

// New builds a model from a parsed config. Parameters start at zero, and
// Forward refuses to run until Init, LoadWeights or LoadStateDict has set
// them (a model without parameters runs at once).
func New(cfg *Config) (*Model, error) {
	if cfg == nil || len(cfg.Layers) == 0 {
		return nil, errors.New("models: empty config")
	}
	slot := map[string]int{}
	for i, in := range cfg.Inputs {
		slot[in] = i
	}
	m := &Model{cfg: cfg}
	seen := map[string]string{}
	for i := range cfg.Layers {
		spec := &cfg.Layers[i]
		st := step{spec: spec}
		for _, in := range spec.Inputs {
			idx, ok := slot[in]
			if !ok {
				return nil, fmt.Errorf("%s:%d: layer %q reads unknown input %q", cfg.Source, spec.Line, spec.Name, in)
			}
			st.inputs = append(st.inputs, idx)
		}
		slot[spec.Name] = len(cfg.Inputs) + i
		m.steps = append(m.steps, st)
		m.numArgs += len(st.inputs)
		if spec.Params == nil { // a Config built by hand, not by ParseConfig
			spec.Params = paramShapes(spec.Layer.Params())
		}
		for _, p := range spec.Params {
			name := spec.Name + "." + p.Name
			if other, dup := seen[name]; dup {
				return nil, fmt.Errorf("%s: parameter %q is defined twice (layers %s and %s)", cfg.Source, name, other, spec.Name)
			}
			seen[name] = spec.Name
		}
		for _, p := range spec.Layer.Params() {
			p.Name = spec.Name + "." + p.Name
			m.params = append(m.params, p)
		}
	}
	if err := m.tieParams(seen); err != nil {
		return nil, err
	}
	m.output = slot[cfg.Output]
	m.weighted = len(m.params) == 0
	return m, nil
}

// tie is one borrowed parameter: the model name it has in the borrowing
// layer ("lm_head.weight") and the model parameter it is ("wte.weight").
type tie struct {
	name, source string
}

// tieParams hands every registry.Tier layer the storage of the parameters
// it borrows, checking that each source exists with the shape the layer
// needs. owners maps parameter names to their layers.
func (m *Model) tieParams(owners map[string]string) (err error) {
	if m.cfg.shapesOnly {
		return nil // nothing is allocated to share
	}
	defer func() {
		if r := recover(); r != nil { // a bug in a layer, perhaps someone else's
			err = fmt.Errorf("%s: tying parameters panicked: %v", m.cfg.Source, r)
		}
	}()
	byName := make(map[string]registry.Param, len(m.params))
	for _, p := range m.params {
		byName[p.Name] = p
	}
	for _, spec := range m.cfg.Layers {
		tier, ok := spec.Layer.(registry.Tier)
		if !ok {
			continue
		}
		for _, t := range tier.TiedParams() {
			name := spec.Name + "." + t.Name
			if other, dup := owners[name]; dup {
				return fmt.Errorf("%s: parameter %q is defined twice (layers %s and %s)", m.cfg.Source, name, other, spec.Name)
			}
			src, ok := byName[t.Source]
			if !ok {
				return fmt.Errorf("%s:%d: layer %q ties %q to %q, which is not a parameter of the model (parameters: %s)",
					m.cfg.Source, spec.Line, spec.Name, t.Name, t.Source, quoteList(m.paramNames()))
			}
			if !src.Value.Shape().Eq(tensor.Shape(t.Shape)) {
				return fmt.Errorf("%s:%d: layer %q ties %q to %q of shape %s, but needs shape %s",
					m.cfg.Source, spec.Line, spec.Name, t.Name, t.Source, FormatShape(src.Value.Shape()), FormatShape(t.Shape))
			}
			if err := tier.Tie(t.Name, src.Value); err != nil {
				return fmt.Errorf("%s:%d: layer %q: tie %q to %q: %w", m.cfg.Source, spec.Line, spec.Name, t.Name, t.Source, err)
			}
			m.ties = append(m.ties, tie{name: name, source: t.Source})
		}
	}
	return nil
}

// Parse parses a YAML config and builds the model in one step, within
// budget.DefaultLimit (see Options).
func Parse(data []byte, source string) (*Model, error) { return Options{}.Parse(data, source) }

// Load reads a YAML model config from a file and builds the model, within
// budget.DefaultLimit (see Options).
func Load(path string) (*Model, error) { return Options{}.Load(path) }

// Config returns the config the model was built from.
func (m *Model) Config() *Config { return m.cfg }

// Name returns the model's name.
func (m *Model) Name() string { return m.cfg.Name }

// Params lists every parameter under its model name, "<layer>.<param>", in
// config order; a parameter a layer borrows from another (registry.Tier,
// a tied head) is listed once, under its source's name. The tensors are the model's own storage; set weights with
// Init, LoadWeights or LoadStateDict, which also let Forward run. A model
// built with Options.ShapesOnly has none of its planned parameters
// allocated: LayerSpec.Params lists them.
//
// The layers keep values derived from the weights between passes (weights
// packed for the GEMM kernels): after writing parameter values through
// these tensors once the model has run, call ParamsChanged.
func (m *Model) Params() []registry.Param { return m.params }

// ParamsChanged tells the layers that parameter values were written in
// place (through the tensors Params lists), so that they drop what they
// derived from the old values (registry.ParamsWatcher). Init, LoadWeights
// and LoadStateDict call it; call it after writing parameters yourself
// once the model has run, and not while a Forward or Step is running.
func (m *Model) ParamsChanged() {
	for _, spec := range m.cfg.Layers {
		if w, ok := spec.Layer.(registry.ParamsWatcher); ok {
			w.ParamsChanged()
		}
	}
}

// NumParams counts the scalar parameters, allocated or planned; a count
// beyond int (a planned model too large to build) is reported as the
// largest int.
func (m *Model) NumParams() int {
	var n int64
	for _, l := range m.cfg.Layers {
		n = addCapped(n, CountParams(l.Params))
	}
	return int(min(n, math.MaxInt))
}

// CountParams counts the scalars of parameters of the given shapes,
// capped at math.MaxInt64.
func CountParams(shapes []registry.ParamShape) int64 {
	var n int64
	for _, p := range shapes {
		size := int64(1)
		for _, d := range p.Shape {
			if d > 0 && size > math.MaxInt64/int64(d) {
				size = math.MaxInt64
				break
			}
			size *= int64(max(d, 0))
		}
		n = addCapped(n, size)
	}
	return n
}

// addCapped adds two non-negative counts, capped at math.MaxInt64.
func addCapped(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// runnable refuses to run a model built with Options.ShapesOnly.
func (m *Model) runnable() error {
	if m.cfg.shapesOnly {
		return fmt.Errorf("model %q was built with ShapesOnly: it describes the model but has no parameters to run", m.cfg.Name)
	}
	return nil
}

// Layers returns the model's layer specs in config order.
func (m *Model) Layers() []LayerSpec { return m.cfg.Layers }

// HasWeights reports whether the parameters have been set by Init,
// LoadWeights or LoadStateDict, or the model has none.
func (m *Model) HasWeights() bool { return m.weighted }

// errNoWeights is the error of a pass over a model whose weights were never
// set: its parameters are the zeros New allocated.
func (m *Model) errNoWeights() error {
	return fmt.Errorf("model %q has no weights: call Init(seed), LoadWeights(path) or LoadStateDict before running it (its parameters are all zero)",
		m.cfg.Name)
}

// Forward runs the model on its inputs (as many as the config's inputs
// list, each of the element type the config declares: float32, or int64
// for token ids, masks and positions). run may be nil for a plain eval pass. Errors name the layer. A
// model whose weights were never set is an error, not a pass on zeros.
// Forward checks run.Context before every layer (and long layers inside
// their loops) and returns its error, wrapped, once it is done. The
// result is the caller's; Session.Forward reuses its memory instead.
func (m *Model) Forward(run *registry.Run, inputs ...*tensor.Dense) (*tensor.Dense, error) {
	return m.forward(run, inputs, nil, nil, nil)
}

// evalRun is the Run of a plain eval pass, for a nil Run; only read.
var evalRun registry.Run

// forward runs the model, in session s when s is not nil: its value
// slots, Run and lent outputs instead of fresh ones. The values of the
// slots named (model inputs, then layers) are also stored into into.
func (m *Model) forward(run *registry.Run, inputs []*tensor.Dense, s *Session, named []int, into []*tensor.Dense) (*tensor.Dense, error) {
	if err := m.runnable(); err != nil {
		return nil, err
	}
	if !m.weighted {
		return nil, m.errNoWeights()
	}
	run, err := m.checkInputs(run, inputs)
	if err != nil {
		return nil, err
	}
	return m.pass(run, inputs, s, named, into, func(i int, layerRun *registry.Run, args []*tensor.Dense) (*tensor.Dense, error) {
		spec := m.steps[i].spec
		out, err := forwardLayer(spec.Layer, layerRun, args)
		if err != nil {
			return nil, fmt.Errorf("layer %q (%s): %w", spec.Name, spec.Type, err)
		}
		return out, nil
	})
}

// checkInputs checks a pass's inputs against the config (their number,
// none nil, each of its declared element type) and its Run, which it
// returns: an eval Run for nil.
func (m *Model) checkInputs(run *registry.Run, inputs []*tensor.Dense) (*registry.Run, error) {
	if len(inputs) != len(m.cfg.Inputs) {
		return nil, fmt.Errorf("model %q takes %d input(s) (%s), got %d",
			m.cfg.Name, len(m.cfg.Inputs), strings.Join(m.cfg.Inputs, ", "), len(inputs))
	}
	if run == nil {
		run = &evalRun
	}
	if run.Train && run.RNG == nil {
		return nil, errors.New("train mode needs a Run.RNG for dropout")
	}
	for i, in := range inputs {
		if in == nil {
			return nil, fmt.Errorf("model %q: input %q is nil", m.cfg.Name, m.cfg.Inputs[i])
		}
		if err := m.checkDtype(i, in); err != nil {
			return nil, err
		}
	}
	return run, nil
}

// pass runs layer after layer on the checked inputs, in session s when s
// is not nil (its value slots, Run and lent outputs instead of fresh
// ones), and returns the model's output. call computes layer i from its
// arguments with layerRun, the caller's Run naming the layer; run's
// context is checked before every layer. The values of the slots named
// (model inputs, then layers) are also stored into into.
func (m *Model) pass(run *registry.Run, inputs []*tensor.Dense, s *Session, named []int, into []*tensor.Dense,
	call func(i int, layerRun *registry.Run, args []*tensor.Dense) (*tensor.Dense, error)) (*tensor.Dense, error) {
	// One allocation holds the value slots and, after them, the argument
	// lists of every step; layers do not keep their argument slices.
	var values []*tensor.Dense
	var layerRun *registry.Run // the caller's Run, with each layer's path in turn
	if s != nil {
		values, layerRun = s.values, &s.run
		*layerRun = *run
		layerRun.Outputs = &s.outputs
		defer clear(s.values) // hold no caller's tensors between passes
	} else {
		values = make([]*tensor.Dense, len(inputs)+len(m.steps)+m.numArgs)
		layerRun = new(registry.Run)
		*layerRun = *run
		layerRun.Outputs = nil
	}
	args := values[len(inputs)+len(m.steps):]
	values = values[:len(inputs)+len(m.steps)]
	copy(values, inputs)
	for i, st := range m.steps {
		stepArgs := args[:len(st.inputs):len(st.inputs)]
		args = args[len(st.inputs):]
		for j, idx := range st.inputs {
			stepArgs[j] = values[idx]
		}
		layerRun.Layer = st.spec.Name
		if s != nil {
			s.outputs.Select(i)
		}
		if err := run.Err(); err != nil {
			return nil, stopped(m.cfg.Name, st.spec, err)
		}
		out, err := call(i, layerRun, stepArgs)
		if err != nil {
			return nil, err
		}
		values[len(inputs)+i] = out
	}
	for k, idx := range named {
		into[k] = values[idx]
	}
	return values[m.output], nil
}

// checkDtype checks that input i has the element type the config declares
// for it.
func (m *Model) checkDtype(i int, in *tensor.Dense) error {
	if want := m.cfg.InputDtype(i); in.Dtype() != want {
		return fmt.Errorf("model %q: input %q is %v, want %v", m.cfg.Name, m.cfg.Inputs[i], in.Dtype(), want)
	}
	return nil
}

// stopped is the error of a pass whose context ended (deadline,
// cancellation) before the layer ran; it wraps the context's error.
func stopped(model string, spec *LayerSpec, err error) error {
	return fmt.Errorf("model %q stopped before layer %q (%s): %w", model, spec.Name, spec.Type, err)
}

// forwardLayer calls a layer's Forward, turning a panic (a bug in a layer,
// perhaps someone else's) into an error so that it cannot cross our API.
func forwardLayer(l registry.Layer, run *registry.Run, args []*tensor.Dense) (out *tensor.Dense, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("panic in Forward: %v", r)
		}
	}()
	out, err = l.Forward(run, args)
	if err == nil && out == nil {
		err = errors.New("Forward returned no output")
	}
	return out, err
}
