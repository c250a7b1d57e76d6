package models

import (
	"fmt"
	"path/filepath"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/torchrand"
	"github.com/attnrun/attnrun/registry"
	"github.com/attnrun/attnrun/tensorio"
)

// Init fills every parameter from its PyTorch initialization scheme with a
// generator that reproduces PyTorch's CPU random numbers: for a model whose
// config lists its layers in the order the PyTorch module creates them,
// Init(s) gives the weights torch.manual_seed(s) would. An invalid scheme
// (a bound or deviation a layer got wrong) is an error naming the parameter.
func (m *Model) Init(seed uint64) error {
	if err := m.runnable(); err != nil {
		return err
	}
	g := torchrand.New(seed)
	for _, p := range m.params {
		data := p.Value.Data().([]float32)
		var err error
		switch p.Init.Dist {
		case registry.Uniform:
			err = g.Uniform(data, p.Init.A, p.Init.B)
		case registry.Normal:
			err = g.Normal(data, p.Init.A, p.Init.B)
		case registry.Constant:
			for i := range data {
				data[i] = float32(p.Init.A)
			}
		default:
			err = fmt.Errorf("unknown distribution %d", p.Init.Dist)
		}
		if err != nil {
			return fmt.Errorf("init parameter %q: %w", p.Name, err)
		}
	}
	for _, spec := range m.cfg.Layers {
		if f, ok := spec.Layer.(registry.InitFinisher); ok {
			f.FinishInit()
		}
	}
	m.ParamsChanged()
	m.weighted = true
	return nil
}

// LoadWeights loads a state dict from a .npz or .safetensors file whose keys
// are the model's parameter names. Errors name the file and the parameter.
func (m *Model) LoadWeights(path string) error {
	if err := m.runnable(); err != nil {
		return err
	}
	var names []string
	var tensors []*tensor.Dense
	var err error
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npz":
		names, tensors, err = tensorio.ReadNPZ(path)
	case ".safetensors":
		names, tensors, _, err = tensorio.ReadSafetensors(path)
	default:
		return fmt.Errorf("%s: unknown weights format (want .npz or .safetensors)", path)
	}
	if err != nil {
		return err
	}
	if err := m.LoadStateDict(StateDictOf(names, tensors)); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// StateDictOf pairs names with tensors, as the state-dict readers return them.
func StateDictOf(names []string, tensors []*tensor.Dense) map[string]*tensor.Dense {
	dict := make(map[string]*tensor.Dense, len(names))
	for i, name := range names {
		dict[name] = tensors[i]
	}
	return dict
}
