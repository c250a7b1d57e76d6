package models

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/tensorio"
)

// presetFS holds the presets: index.yaml and one folder per preset with
// model.yaml, weights.npz (when the model has parameters), input.npy and
// expected.npy. testdata/torch/seeds.py writes them from PyTorch.
//
//go:embed presets
var presetFS embed.FS

// Preset is a model config with weights and an example input, embedded in
// the binary, reproducing a tensor printed by one of the seed notebooks.
type Preset struct {
	// Name is what `attnrun run NAME` takes.
	Name string `yaml:"name"`
	// Description says what the preset computes and where it comes from,
	// including any difference from the notebook's code.
	Description string `yaml:"description"`
	// Source names the notebook and cell.
	Source string `yaml:"source"`
	// Attention, if set, names the layer whose attention weights the preset
	// shows instead of the model output.
	Attention string `yaml:"attention"`
	// Printed is the tensor as the notebook prints it (4 decimals), if it does.
	Printed any `yaml:"printed"`
}

// Presets returns every embedded preset in display order. The list is a
// copy: callers may keep or change it.
func Presets() ([]Preset, error) {
	list, err := presetIndex()
	return slices.Clone(list), err
}

// presetIndex decodes the embedded index once; it cannot change at run time.
var presetIndex = sync.OnceValues(func() ([]Preset, error) {
	data, err := presetFS.ReadFile("presets/index.yaml")
	if err != nil {
		return nil, fmt.Errorf("presets: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var list []Preset
	if err := dec.Decode(&list); err != nil {
		return nil, fmt.Errorf("presets/index.yaml: %w", err)
	}
	return list, nil
})

// LookupPreset finds a preset by name; an unknown name is an error listing
// the available ones.
func LookupPreset(name string) (*Preset, error) {
	list, err := Presets()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(list))
	for i := range list {
		if list[i].Name == name {
			return &list[i], nil
		}
		names[i] = list[i].Name
	}
	return nil, fmt.Errorf("unknown preset %q; available: %s", name, strings.Join(names, ", "))
}

// Model builds the preset's model and loads its embedded weights.
func (p *Preset) Model() (*Model, error) { return p.ModelWith(Options{}) }

// ModelWith builds the preset's model with the given options and loads its
// embedded weights, unless opts.ShapesOnly leaves the model without them.
func (p *Preset) ModelWith(opts Options) (*Model, error) {
	data, err := p.file("model.yaml")
	if err != nil {
		return nil, err
	}
	m, err := opts.Parse(data, "presets/"+p.Name+"/model.yaml")
	if err != nil {
		return nil, err
	}
	if len(m.Params()) == 0 {
		return m, nil
	}
	weights, err := p.file("weights.npz")
	if err != nil {
		return nil, err
	}
	names, tensors, err := tensorio.ReadNPZFrom(bytes.NewReader(weights), int64(len(weights)))
	if err != nil {
		return nil, fmt.Errorf("preset %s: weights.npz: %w", p.Name, err)
	}
	if err := m.LoadStateDict(StateDictOf(names, tensors)); err != nil {
		return nil, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	return m, nil
}

// Input returns the preset's example input.
func (p *Preset) Input() (*tensor.Dense, error) { return p.tensor("input.npy") }

// Expected returns PyTorch's output for the example input (the attention
// weights of the Attention layer when that is set).
func (p *Preset) Expected() (*tensor.Dense, error) { return p.tensor("expected.npy") }

// PrintedValues flattens the notebook's printed tensor, if any, returning
// its values and shape.
func (p *Preset) PrintedValues() ([]float64, []int, error) {
	if p.Printed == nil {
		return nil, nil, nil
	}
	var values []float64
	var shape []int
	var walk func(v any, depth int) error
	walk = func(v any, depth int) error {
		switch x := v.(type) {
		case []any:
			if depth == len(shape) {
				shape = append(shape, len(x))
			} else if shape[depth] != len(x) {
				return errors.New("printed tensor is ragged")
			}
			for _, e := range x {
				if err := walk(e, depth+1); err != nil {
					return err
				}
			}
		case int:
			values = append(values, float64(x))
		case float64:
			values = append(values, x)
		default:
			return fmt.Errorf("printed tensor holds %T", v)
		}
		return nil
	}
	if err := walk(p.Printed, 0); err != nil {
		return nil, nil, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	return values, shape, nil
}

func (p *Preset) file(name string) ([]byte, error) {
	data, err := fs.ReadFile(presetFS, path.Join("presets", p.Name, name))
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	return data, nil
}

func (p *Preset) tensor(name string) (*tensor.Dense, error) {
	data, err := p.file(name)
	if err != nil {
		return nil, err
	}
	t, err := tensorio.ReadNPY(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("preset %s: %s: %w", p.Name, name, err)
	}
	return t, nil
}
