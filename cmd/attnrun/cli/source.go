package cli

import (
	"fmt"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/tensorio"
)

// source is what run, check, export, plot and bench work on: a model with
// its weights, and the preset it came from, if any.
type source struct {
	model  *models.Model
	preset *models.Preset
	// lim are the command's limits, which the model was built within.
	lim *limits
}

// sourceOptions say where a model's weights come from: a state dict
// (weights), else a preset's own or an ONNX file's initializers, else a
// seeded initialization. seedGiven records that the user asked for one
// (--seed), which a lifted config needs to run without its weights.
type sourceOptions struct {
	weights   string
	seed      uint64
	seedGiven bool
}

// openSource resolves MODEL.yaml, a preset name or an ONNX file attnrun
// wrote, and loads weights: --weights first, then the preset's or the
// file's own, then a seeded initialization. A config attnrun import lifted
// is refused without weights: its weights are in the file import wrote,
// and random ones would be silently wrong. check calls it; the commands
// with a --seed flag call openSourceWith, which knows whether it was given.
func openSource(lim *limits, target, weights string, seed uint64) (*source, error) {
	return openSourceWith(lim, target, sourceOptions{weights: weights, seed: seed})
}

// openSourceWith is openSource with all the options.
func openSourceWith(lim *limits, target string, o sourceOptions) (*source, error) {
	kind, err := resolveModel(target)
	if err != nil {
		return nil, err
	}
	src := source{lim: lim}
	switch kind {
	case modelConfig:
		src.model, err = lim.models().Load(target)
	case modelONNX:
		if o.weights != "" {
			return nil, usageError{fmt.Errorf("--weights %s: %s carries its own weights", o.weights, target)}
		}
		src.model, err = lim.loadAttnrunFile(target)
	default:
		src.preset, err = models.LookupPreset(target)
		if err == nil {
			src.model, err = src.preset.ModelWith(lim.models())
		}
	}
	if err != nil {
		return nil, err
	}
	switch {
	case o.weights != "":
		if err := lim.loadWeights(src.model, o.weights); err != nil {
			return nil, err
		}
	case src.model.HasWeights():
	case isLifted(src.model) && !o.seedGiven:
		return nil, usageError{fmt.Errorf("%s: model %q was lifted from an ONNX file by attnrun import, and its weights are in the files import wrote: "+
			"give %s, or --seed N to run it on random weights", target, src.model.Name(), liftedWeights(src.model))}
	case src.preset == nil:
		if err := src.model.Init(o.seed); err != nil {
			return nil, err
		}
	}
	return &src, nil
}

// isLifted tells a config attnrun import wrote: import --config-out starts
// it with a comment saying so (liftedHeader), and lift describes a model
// it built as "lifted from ONNX (...) by attnrun import"; a config read
// back from a file attnrun exported keeps its own description.
func isLifted(m *models.Model) bool {
	d := m.Config().Description
	return strings.HasPrefix(string(m.Config().YAML), liftedHeader) ||
		strings.HasPrefix(d, "lifted from ONNX") && strings.HasSuffix(d, "by attnrun import")
}

// liftedHeader starts the comment import --config-out writes first.
const liftedHeader = "# lifted from "

// liftedWeights says where a lifted config's weights are: the line
// import --config-out wrote first, or the flag to give in general.
func liftedWeights(m *models.Model) string {
	first, _, _ := strings.Cut(string(m.Config().YAML), "\n")
	if _, weights, ok := strings.Cut(first, "its weights: "); ok && strings.HasPrefix(first, liftedHeader) {
		return weights
	}
	return "--weights LIFTED.onnx (the file import -o wrote) or the state dict of import --state-dict"
}

// loadAttnrunFile builds the model of an ONNX file attnrun wrote (attnrun
// export, attnrun import), with the weights of its initializers. Any other
// ONNX file is refused: its initializers are the graph's, not named after
// attnrun parameters, and import is what turns it into one.
func (l *limits) loadAttnrunFile(path string) (*models.Model, error) {
	m, err := l.readModel(path)
	if err != nil {
		return nil, err
	}
	if !lift.IsAttnrun(m) {
		return nil, fmt.Errorf("%s was not written by attnrun (it has no attnrun config in its metadata): "+
			"attnrun import %s -o lifted.onnx lifts it into attnrun layers, with its weights", path, path)
	}
	model, _, err := l.loadAttnrun(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return model, nil
}

// loadWeights loads a state dict into m: .npz or .safetensors by their
// content, or the initializers of an ONNX file attnrun wrote, whose model
// must have m's parameters (names and shapes).
func (l *limits) loadWeights(m *models.Model, path string) error {
	switch s := sniffPath(path); s.kind {
	case kindMissing:
		return fmt.Errorf("--weights %s: no such file", path)
	case kindNPZ, kindSafetensors:
		return loadStateDictFile(m, path, s.kind)
	case kindONNX:
		from, err := l.loadAttnrunFile(path)
		if err != nil {
			return fmt.Errorf("--weights: %w", err)
		}
		_, dict := from.StateDict()
		if err := m.LoadStateDict(dict); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	default:
		return usageError{fmt.Errorf("--weights %s: this is %s, not a state dict (.npz, .safetensors, or an ONNX file attnrun wrote); %s", path, s.what, s.usage(path))}
	}
}

// loadStateDictFile loads an .npz or safetensors state dict, whatever
// its name says.
func loadStateDictFile(m *models.Model, path string, kind fileKind) error {
	var names []string
	var tensors []*tensor.Dense
	var err error
	if kind == kindNPZ {
		names, tensors, err = tensorio.ReadNPZ(path)
	} else {
		names, tensors, _, err = tensorio.ReadSafetensors(path)
	}
	if err != nil {
		return err
	}
	if err := m.LoadStateDict(models.StateDictOf(names, tensors)); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
