package models

import (
	"errors"
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/registry"
)

// Profile is what one forward pass of a model costs on inputs of given
// shapes: per layer and in total, parameters and FLOPs (counted by the
// rules of registry.FLOPCounter: 2 per multiply-add of the matrix
// products, attention dense, elementwise work not counted).
type Profile struct {
	// Inputs are the shapes the pass ran on, one per model input.
	Inputs []tensor.Shape
	// Layers has one entry per layer, in config order.
	Layers []LayerProfile
	// Params counts the model's scalar parameters.
	Params int64
	// FLOPs sums the counts of the layers that report one; it is a lower
	// bound when Uncounted is not empty.
	FLOPs int64
	// Uncounted names the layers that do not count their FLOPs (types
	// that do not implement registry.FLOPCounter).
	Uncounted []string
}

// LayerProfile is one layer's entry in a Profile.
type LayerProfile struct {
	// Name is the layer's name in the config; Type its registry ID.
	Name, Type string
	// Params counts the layer's scalar parameters.
	Params int64
	// Output is the shape of the layer's output.
	Output tensor.Shape
	// FLOPs is the layer's count; meaningful only when Counted.
	FLOPs int64
	// Counted reports whether the layer's type counts FLOPs.
	Counted bool
}

// Profile reports, for inputs of the given shapes (one per model input),
// each layer's parameters, output shape and FLOPs, and the totals.
//
// Output shapes come from the layers themselves (registry.OutputShaper,
// every built-in), so that describing a model allocates neither
// parameters nor activations, whatever the shapes; a shape a layer does
// not accept is an error naming it. A layer type that cannot say is run
// once on zeros of its input shapes, allocated within the model's memory
// budget; in a model built with Options.ShapesOnly such a layer can only
// be described if it allocated its parameters itself (it is not a
// registry.Provisioner). The weights do not matter: the model need not be
// initialized.
func (m *Model) Profile(inputs ...tensor.Shape) (*Profile, error) {
	if len(inputs) != len(m.cfg.Inputs) {
		return nil, fmt.Errorf("model %q takes %d input(s) (%v), got %d shape(s)",
			m.cfg.Name, len(m.cfg.Inputs), m.cfg.Inputs, len(inputs))
	}
	p := &Profile{}
	shapes := make([]tensor.Shape, len(inputs)+len(m.steps))
	for i, shape := range inputs {
		if err := checkInputShape(shape); err != nil {
			return nil, fmt.Errorf("model %q: input %q: %w", m.cfg.Name, m.cfg.Inputs[i], err)
		}
		shapes[i] = shape.Clone()
		p.Inputs = append(p.Inputs, shape.Clone())
	}
	for i, st := range m.steps {
		in := make([]tensor.Shape, len(st.inputs))
		for j, idx := range st.inputs {
			in[j] = shapes[idx].Clone()
		}
		out, err := m.outputShape(st, in)
		if err != nil {
			return nil, fmt.Errorf("layer %q (%s): %w", st.spec.Name, st.spec.Type, err)
		}
		shapes[len(inputs)+i] = out
		lp := LayerProfile{Name: st.spec.Name, Type: st.spec.Type, Output: out.Clone(), Params: CountParams(st.spec.Params)}
		if counter, ok := st.spec.Layer.(registry.FLOPCounter); ok {
			if lp.FLOPs, err = countFLOPs(counter, in); err != nil {
				return nil, fmt.Errorf("layer %q (%s): %w", st.spec.Name, st.spec.Type, err)
			}
			lp.Counted = true
			if p.FLOPs > math.MaxInt64-lp.FLOPs {
				return nil, fmt.Errorf("model %q: total FLOP count overflows int64", m.cfg.Name)
			}
			p.FLOPs += lp.FLOPs
		} else {
			p.Uncounted = append(p.Uncounted, st.spec.Name)
		}
		p.Params = addCapped(p.Params, lp.Params)
		p.Layers = append(p.Layers, lp)
	}
	return p, nil
}

// checkInputShape checks a shape given for a model input: at least one
// dimension, every one positive.
func checkInputShape(shape tensor.Shape) error {
	if len(shape) == 0 {
		return errors.New("empty shape")
	}
	for _, d := range shape {
		if d <= 0 {
			return fmt.Errorf("shape %v: every dimension must be positive", FormatShape(shape))
		}
	}
	return nil
}

// outputShape is a layer's output shape for inputs of the given shapes:
// what the layer says (registry.OutputShaper), or what it returns when run
// once on zeros.
func (m *Model) outputShape(st step, in []tensor.Shape) (shape tensor.Shape, err error) {
	defer func() {
		if r := recover(); r != nil {
			shape, err = nil, fmt.Errorf("panic in OutputShape: %v", r)
		}
	}()
	if s, ok := st.spec.Layer.(registry.OutputShaper); ok {
		shape, err := s.OutputShape(in)
		if err == nil && len(shape) == 0 {
			err = errors.New("OutputShape returned no shape")
		}
		return shape, err
	}
	if _, planned := st.spec.Layer.(registry.Provisioner); planned && m.cfg.shapesOnly {
		return nil, errors.New("the layer type does not report its output shape (registry.OutputShaper), and without its parameters it cannot be run to find it")
	}
	args, release, err := m.zeros(in)
	if err != nil {
		return nil, err
	}
	defer release()
	out, err := forwardLayer(st.spec.Layer, &registry.Run{Layer: st.spec.Name}, args)
	if err != nil {
		return nil, err
	}
	return out.Shape().Clone(), nil
}

// zeros allocates float32 zeros of the given shapes within the model's
// memory budget; release gives the bytes back.
func (m *Model) zeros(shapes []tensor.Shape) ([]*tensor.Dense, func(), error) {
	var reserved int64
	release := func() { m.cfg.budget.Release(reserved) }
	args := make([]*tensor.Dense, len(shapes))
	for i, shape := range shapes {
		n := budget.Elements(shape)
		bytes := budget.Bytes(n, 4)
		if err := m.cfg.budget.Reserve(bytes, fmt.Sprintf("a zero input of shape %s", FormatShape(shape))); err != nil {
			release()
			return nil, nil, err
		}
		reserved += bytes
		args[i] = tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(make([]float32, n)))
	}
	return args, release, nil
}

// countFLOPs calls a layer's FLOPs, turning a panic into an error as
// forwardLayer does for Forward.
func countFLOPs(l registry.FLOPCounter, shapes []tensor.Shape) (n int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("panic in FLOPs: %v", r)
		}
	}()
	n, err = l.FLOPs(shapes)
	if err == nil && n < 0 {
		err = fmt.Errorf("FLOPs returned a negative count %d", n)
	}
	return n, err
}
