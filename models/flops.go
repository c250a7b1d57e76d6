package models

import (
	"errors"
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// maxProfileElements bounds each input a profile allocates: 1 GiB of
// float32, so that a mistyped --shape fails with an error instead of
// exhausting memory.
const maxProfileElements = 1 << 28

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

// Profile runs the model once on zero inputs of the given shapes, one per
// model input, to learn every layer's input and output shapes, and
// reports each layer's parameters, output shape and FLOPs. Running the
// layers, rather than inferring shapes, means every layer type works,
// custom ones included, and a shape the model does not accept gives the
// error Forward gives; the cost is one forward pass in eval mode. The
// weights do not matter: the model need not be initialized.
func (m *Model) Profile(inputs ...tensor.Shape) (*Profile, error) {
	if len(inputs) != len(m.cfg.Inputs) {
		return nil, fmt.Errorf("model %q takes %d input(s) (%v), got %d shape(s)",
			m.cfg.Name, len(m.cfg.Inputs), m.cfg.Inputs, len(inputs))
	}
	p := &Profile{}
	values := make([]*tensor.Dense, len(inputs)+len(m.steps))
	for i, shape := range inputs {
		x, err := zeroInput(shape)
		if err != nil {
			return nil, fmt.Errorf("model %q: input %q: %w", m.cfg.Name, m.cfg.Inputs[i], err)
		}
		values[i] = x
		p.Inputs = append(p.Inputs, shape.Clone())
	}
	for i, st := range m.steps {
		args := make([]*tensor.Dense, len(st.inputs))
		shapes := make([]tensor.Shape, len(st.inputs))
		for j, idx := range st.inputs {
			args[j], shapes[j] = values[idx], values[idx].Shape().Clone()
		}
		out, err := forwardLayer(st.spec.Layer, &registry.Run{Layer: st.spec.Name}, args)
		if err != nil {
			return nil, fmt.Errorf("layer %q (%s): %w", st.spec.Name, st.spec.Type, err)
		}
		values[len(inputs)+i] = out
		lp := LayerProfile{Name: st.spec.Name, Type: st.spec.Type, Output: out.Shape().Clone()}
		for _, param := range st.spec.Layer.Params() {
			lp.Params += int64(param.Value.Shape().TotalSize())
		}
		if counter, ok := st.spec.Layer.(registry.FLOPCounter); ok {
			if lp.FLOPs, err = countFLOPs(counter, shapes); err != nil {
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
		p.Params += lp.Params
		p.Layers = append(p.Layers, lp)
	}
	return p, nil
}

// zeroInput allocates a float32 tensor of zeros, checking the shape
// against maxProfileElements first.
func zeroInput(shape tensor.Shape) (*tensor.Dense, error) {
	if len(shape) == 0 {
		return nil, errors.New("empty shape")
	}
	n := 1
	for _, d := range shape {
		if d <= 0 {
			return nil, fmt.Errorf("shape %v: every dimension must be positive", shape)
		}
		if n > maxProfileElements/d {
			return nil, fmt.Errorf("shape %v is above the limit of %d elements", shape, maxProfileElements)
		}
		n *= d
	}
	return tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(make([]float32, n))), nil
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
