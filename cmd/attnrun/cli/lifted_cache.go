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
	var err error
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
