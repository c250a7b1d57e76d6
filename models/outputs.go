package models

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// ForwardNamed runs the model as Forward does and returns, besides its
// output, the values of the named model inputs and layers, in order: the
// other tensors a graph returns beside its output (BERT's pooled output
// beside the sequence, a block's hidden state). Each is the layer's own
// output, the caller's as Forward's result is.
func (m *Model) ForwardNamed(run *registry.Run, names []string, inputs ...*tensor.Dense) (*tensor.Dense, []*tensor.Dense, error) {
	slots := make([]int, len(names))
	for k, name := range names {
		slot, ok := m.slot(name)
		if !ok {
			return nil, nil, fmt.Errorf("model %q has no input or layer %q", m.cfg.Name, name)
		}
		slots[k] = slot
	}
	values := make([]*tensor.Dense, len(names))
	out, err := m.forward(run, inputs, nil, slots, values)
	if err != nil {
		return nil, nil, err
	}
	return out, values, nil
}

// slot is the index of a model input's or a layer's value in a pass.
func (m *Model) slot(name string) (int, bool) {
	for i, in := range m.cfg.Inputs {
		if in == name {
			return i, true
		}
	}
	for i, st := range m.steps {
		if st.spec.Name == name {
			return len(m.cfg.Inputs) + i, true
		}
	}
	return 0, false
}
