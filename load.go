package attnrun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/attnrun/attnrun/internal/budget"
	_ "github.com/attnrun/attnrun/layers" // the built-in layer types
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/lift"
)

// An Option adjusts how Load builds a model (or how ReadTensor and
// ReadArray read a file).
type Option func(*settings)

// settings are the options of one Load.
type settings struct {
	weights   string
	seed      uint64
	seeded    bool
	maxMemory int64
	executor  bool
}

// settingsOf applies the options in order.
func settingsOf(opts []Option) settings {
	var s settings
	for _, o := range opts {
		o(&s)
	}
	return s
}

// codec is what the ONNX codec accepts: its default limits, within the
// memory budget.
func (s settings) codec() onnxio.Limits {
	lim := onnxio.DefaultLimits
	lim.MaxMemory = s.maxMemory
	return lim
}

// WithWeights loads the model's weights from a state dict, an .npz or
// .safetensors file whose keys are the model's parameter names
// ("attn.W_query.weight"); it replaces a preset's or an attnrun ONNX
// file's own weights. Loading is strict, as PyTorch's load_state_dict:
// every parameter with its exact shape, no other keys.
func WithWeights(path string) Option { return func(s *settings) { s.weights = path } }

// WithSeed initializes the weights from PyTorch's initialization schemes
// with a generator that reproduces PyTorch's: for a config that lists its
// layers in the order the PyTorch module creates them, the weights
// torch.manual_seed(seed) gives.
func WithSeed(seed uint64) Option { return func(s *settings) { s.seed, s.seeded = seed, true } }

// ErrMemoryBudget is matched (errors.Is) by the error of every allocation
// refused because it would exceed the memory budget (WithMaxMemory).
var ErrMemoryBudget = budget.ErrExceeded

// WithMaxMemory bounds, in bytes, what reading an ONNX file holds in
// memory, what each run of the graph executor holds at once, and what
// ReadTensor and ReadArray read; exceeding it is an error matching
// ErrMemoryBudget, raised before allocating. 0 means the default, 4 GiB. Models on attnrun's layers allocate what
// their layers need; the bound does not apply to them.
func WithMaxMemory(bytes int64) Option { return func(s *settings) { s.maxMemory = bytes } }

// WithExecutor runs an ONNX file attnrun wrote on the graph executor, as
// any other ONNX file, rather than on the attnrun layers it holds: the
// way to check one against the other.
func WithExecutor() Option { return func(s *settings) { s.executor = true } }

// Load builds a runnable model from path:
//
//   - a YAML model config (.yaml, .yml), whose weights come from WithWeights
//     or WithSeed (without either, Forward refuses to run on zeros);
//   - the name of an embedded preset ("seed-mha-wrapper"), with its weights;
//   - an ONNX file (.onnx): one attnrun wrote becomes attnrun layers with
//     the weights of its initializers, any other runs on the graph
//     executor.
//
// Errors name the file and what was expected.
func Load(path string, opts ...Option) (*Model, error) {
	s := settingsOf(opts)
	if s.weights != "" && s.seeded {
		return nil, errors.New("attnrun.Load: WithWeights and WithSeed both set the weights; give one")
	}
	kind, err := kindOf(path)
	if err != nil {
		return nil, err
	}
	switch kind {
	case onnxFile:
		return loadONNX(path, s)
	case configFile:
		m, err := models.Load(path)
		if err != nil {
			return nil, err
		}
		return withLayers(m, path, nil, s)
	}
	preset, err := models.LookupPreset(path)
	if err != nil {
		return nil, err
	}
	m, err := preset.Model()
	if err != nil {
		return nil, err
	}
	return withLayers(m, "preset "+path, nil, s)
}

// kind is what Load was handed.
type kind int

const (
	preset kind = iota
	configFile
	onnxFile
)

// kindOf tells a config from an ONNX file by extension, and either from a
// preset name, which has no extension and names no file. A file of another
// kind is an error that says what it is for.
func kindOf(path string) (kind, error) {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".onnx":
		return onnxFile, nil
	case ".yaml", ".yml":
		return configFile, nil
	case ".npz", ".safetensors":
		return 0, fmt.Errorf("%s is a state dict, not a model: pass it with attnrun.WithWeights to Load of a model config", path)
	case ".npy", ".pb":
		return 0, fmt.Errorf("%s is a tensor, not a model: read it with attnrun.ReadTensor and pass it to Forward", path)
	}
	if _, err := os.Stat(path); err == nil || ext != "" || strings.ContainsRune(path, os.PathSeparator) {
		return 0, fmt.Errorf("%s: want a model config (.yaml, .yml), an ONNX file (.onnx) or a preset name", path)
	}
	return preset, nil
}

// loadONNX reads an ONNX file and prepares it to run on layers or on the
// executor.
func loadONNX(path string, s settings) (*Model, error) {
	file, err := s.codec().ReadModel(path)
	if err != nil {
		return nil, err
	}
	if lift.IsAttnrun(file) && !s.executor {
		if binds, err := lift.ReadParamInputs(file); err != nil || len(binds) > 0 {
			if err == nil {
				err = fmt.Errorf("the file takes weights as graph inputs (%q), which Load does not bind to the layers; `attnrun run` and `attnrun check` do", binds[0].Input)
			}
			return nil, fmt.Errorf("%s: %w (attnrun.WithExecutor runs it on the graph instead)", path, err)
		}
		m, outputs, err := lift.Load(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (attnrun.WithExecutor runs it on the graph instead)", path, err)
		}
		return withLayers(m, path, outputs, s)
	}
	if s.weights != "" || s.seeded {
		return nil, fmt.Errorf("%s: the weights of an ONNX graph are its initializers; WithWeights and WithSeed apply to attnrun layers (a config, a preset, a file attnrun wrote)", path)
	}
	g, err := exec.NewWithOptions(file, exec.Options{MaxMemory: s.maxMemory})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m := &Model{source: path, graph: g}
	for _, in := range g.Inputs() {
		m.inputs = append(m.inputs, in.Name)
	}
	for _, out := range g.Outputs() {
		m.outputs = append(m.outputs, out.Name)
	}
	return m, nil
}

// withLayers wraps a model of attnrun layers after setting its weights
// from the options. outputs, for a file attnrun wrote, lists what the file
// returns; nil means the model's output alone.
func withLayers(m *models.Model, source string, outputs []lift.Output, s settings) (*Model, error) {
	switch {
	case s.weights != "":
		if err := m.LoadWeights(s.weights); err != nil {
			return nil, err
		}
	case s.seeded:
		if err := m.Init(s.seed); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
	}
	if outputs == nil {
		outputs = []lift.Output{{Name: m.Config().Output, Layer: m.Config().Output}}
	}
	inputs := append(slices.Clone(m.Config().Inputs), lift.CacheInputs(outputs)...) // a decoder's past inputs follow
	model := &Model{source: source, layers: m, lifted: outputs, inputs: inputs}
	for _, o := range outputs {
		model.outputs = append(model.outputs, o.Name)
	}
	return model, nil
}
