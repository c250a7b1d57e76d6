package cli

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/registry"
)

// runCache runs a lifted decoder with a KV cache on the inputs of the
// graph it came from: the model's inputs, then the past inputs
// (lift.CacheInputs), which may hold no tokens; with f.chunk, chunk new
// tokens at a time (run --incremental), which a file without a cache runs
// too.
func (f *onnxFile) runCache(inputs []*array.Array, pastNames []string) ([]*array.Array, error) {
	inputs, err := f.lifted.bindArrays(inputs)
	if err != nil {
		return nil, err
	}
	own := len(f.lifted.model.Config().Inputs)
	args := make([]*tensor.Dense, own)
	for i, a := range inputs[:own] {
		d, err := a.Dense()
		if err == nil {
			args[i], err = lift.ModelInput(d)
		}
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
	}
	past := map[string]*tensor.Dense{}
	for i, a := range inputs[own:] {
		if a.Len() == 0 {
			continue // a past of no tokens
		}
		d, err := a.Dense()
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", pastNames[i], err)
		}
		past[pastNames[i]] = d
	}
	run := &registry.Run{Context: f.lim.ctx}
	var outs []*tensor.Dense
	if len(pastNames) > 0 {
		outs, err = lift.RunCache(f.lifted.model, f.lifted.outputs, run, args, past, f.chunk)
	} else {
		outs, err = f.decode(run, args)
	}
	if err != nil {
		return nil, err
	}
	return outputArrays(outs)
}

// decode runs a file of layers without a cache chunk tokens at a time: its
// outputs must all be the model's output (no attention weights).
func (f *onnxFile) decode(run *registry.Run, args []*tensor.Dense) ([]*tensor.Dense, error) {
	for _, o := range f.lifted.outputs {
		if o.Weights != "" {
			return nil, fmt.Errorf("--incremental: output %q holds attention weights, which a run token by token does not return whole", o.Name)
		}
	}
	if err := f.lifted.model.CheckIncremental(); err != nil {
		return nil, fmt.Errorf("--incremental: %w", err)
	}
	y, err := f.lifted.model.Decode(run, f.chunk, args...)
	if err != nil {
		return nil, err
	}
	outs := make([]*tensor.Dense, len(f.lifted.outputs))
	for i := range outs {
		outs[i] = y
	}
	return outs, nil
}

// bindArrays is bind for Arrays, which carry a past of no tokens: it loads
// the inputs that hold parameters into the model and returns the others.
func (l *liftedFile) bindArrays(inputs []*array.Array) ([]*array.Array, error) {
	if len(l.binds) == 0 {
		return inputs, nil
	}
	if len(inputs) != len(l.inputs) {
		return nil, fmt.Errorf("the file takes %d inputs %v, got %d", len(l.inputs), l.inputs, len(inputs))
	}
	bound := map[string]bool{}
	for _, b := range l.binds {
		bound[b.Input] = true
	}
	feeds := map[string]*tensor.Dense{}
	var rest []*array.Array
	for i, name := range l.inputs {
		if !bound[name] {
			rest = append(rest, inputs[i])
			continue
		}
		d, err := inputs[i].Dense()
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", name, err)
		}
		feeds[name] = d
	}
	if err := lift.BindParamInputs(l.model, l.binds, feeds); err != nil {
		return nil, err
	}
	return rest, nil
}
