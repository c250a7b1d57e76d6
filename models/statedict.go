package models

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
)

// StateDict returns the model's parameters as a name -> tensor map, and the
// names in model order. The tensors are copies. A tied parameter
// (registry.Tier) is listed under both its names, as PyTorch's
// state_dict() lists it, after the parameters of the model's own.
func (m *Model) StateDict() ([]string, map[string]*tensor.Dense) {
	names := make([]string, len(m.params), len(m.params)+len(m.ties))
	dict := make(map[string]*tensor.Dense, len(m.params)+len(m.ties))
	for i, p := range m.params {
		names[i] = p.Name
		dict[p.Name] = p.Value.Clone().(*tensor.Dense)
	}
	for _, t := range m.ties {
		names = append(names, t.name)
		dict[t.name] = dict[t.source].Clone().(*tensor.Dense)
	}
	return names, dict
}

// LoadStateDict copies weights into the model. Like PyTorch's strict
// load_state_dict, every parameter must be present with its exact shape and
// no extra keys are allowed; float64 tensors are converted to float32. On any
// error the model is left unchanged.
func (m *Model) LoadStateDict(dict map[string]*tensor.Dense) error {
	if err := m.runnable(); err != nil {
		return err
	}
	var missing []string
	for _, p := range m.params {
		if _, ok := dict[p.Name]; !ok {
			missing = append(missing, p.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("state dict is missing parameter(s) %s of model %q", quoteList(missing), m.cfg.Name)
	}
	if err := m.checkTies(dict); err != nil {
		return err
	}
	if len(dict) > len(m.params) {
		known := map[string]bool{}
		for _, p := range m.params {
			known[p.Name] = true
		}
		for _, t := range m.ties {
			known[t.name] = true
		}
		var extra []string
		for name := range dict {
			if !known[name] {
				extra = append(extra, name)
			}
		}
		if len(extra) > 0 {
			sort.Strings(extra)
			return fmt.Errorf("state dict has unexpected key(s) %s; model %q has %s",
				quoteList(extra), m.cfg.Name, quoteList(m.paramNames()))
		}
	}
	values := make([][]float32, len(m.params))
	for i, p := range m.params {
		t := dict[p.Name]
		want := p.Value.Shape()
		if !t.Shape().Eq(want) {
			return fmt.Errorf("state dict parameter %q has shape %v, model %q expects %v",
				p.Name, FormatShape(t.Shape()), m.cfg.Name, FormatShape(want))
		}
		data, err := float32Data(t)
		if err != nil {
			return fmt.Errorf("state dict parameter %q: %w", p.Name, err)
		}
		values[i] = data
	}
	for i, p := range m.params {
		copy(p.Value.Data().([]float32), values[i])
	}
	m.ParamsChanged()
	m.weighted = true
	return nil
}

// checkTies accepts a tied parameter under its borrowing name (PyTorch's
// state_dict() has both names; a safetensors file saved by Hugging Face
// only the source's) when it holds the source's very values: a state dict
// whose two names differ describes an untied model.
func (m *Model) checkTies(dict map[string]*tensor.Dense) error {
	for _, t := range m.ties {
		alias, ok := dict[t.name]
		if !ok {
			continue
		}
		src := dict[t.source]
		a, errA := float32Data(alias)
		b, errB := float32Data(src)
		if errA != nil || errB != nil || !alias.Shape().Eq(src.Shape()) || !slices.Equal(a, b) {
			return fmt.Errorf("state dict parameter %q differs from %q, to which model %q ties it", t.name, t.source, m.cfg.Name)
		}
	}
	return nil
}

func (m *Model) paramNames() []string {
	names := make([]string, len(m.params))
	for i, p := range m.params {
		names[i] = p.Name
	}
	return names
}

// float32Data returns a tensor's elements as float32, converting float64.
func float32Data(t *tensor.Dense) ([]float32, error) {
	switch d := t.Data().(type) {
	case []float32:
		return d, nil
	case []float64:
		out := make([]float32, len(d))
		for i, v := range d {
			out[i] = float32(v)
		}
		return out, nil
	case float32:
		return []float32{d}, nil
	case float64:
		return []float32{float32(d)}, nil
	}
	return nil, fmt.Errorf("dtype %v is not a float (want float32 or float64)", t.Dtype())
}

// FormatShape writes a shape as Python prints a tuple: (2, 3), (3,), and
// () for a scalar; it is array.FormatShape, attnrun's one shape formatter,
// for a tensor.Shape.
func FormatShape(s tensor.Shape) string { return array.FormatShape(s) }

func quoteList(names []string) string {
	const show = 8
	q := make([]string, 0, show+1)
	for i, n := range names {
		if i == show {
			q = append(q, fmt.Sprintf("and %d more", len(names)-show))
			break
		}
		q = append(q, fmt.Sprintf("%q", n))
	}
	return strings.Join(q, ", ")
}
