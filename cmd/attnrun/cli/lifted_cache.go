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
// (lift.CacheInputs), which may hold no tokens.
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
	outs, err := lift.RunCache(f.lifted.model, f.lifted.outputs, &registry.Run{Context: f.lim.ctx}, args, past)
	if err != nil {
		return nil, err
	}
	res := make([]*array.Array, len(outs))
	for i, d := range outs {
		if res[i], err = array.FromDense(d); err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
	}
	return res, nil
}
