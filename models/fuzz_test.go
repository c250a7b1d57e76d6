package models

import (
	"testing"

	"gorgonia.org/tensor"
)

// FuzzParseConfig feeds arbitrary YAML to the config parser: it may reject
// it, but must not panic, and a config it accepts must build a model whose
// forward pass on a small input returns an output or an error.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(wrapperYAML))
	f.Add([]byte("name: m\nlayers:\n  - {name: a, type: attention.multihead, d_in: 8, d_out: 8, context_length: 4, num_heads: 2}\n"))
	f.Add([]byte("name: m\ninputs: [x, y]\nlayers:\n  - {name: s, type: nn.add, inputs: [x, y]}\n  - {name: c, type: nn.concat, inputs: [s, x]}\n"))
	f.Add([]byte("name: m\nlayers:\n  - {name: p, type: position.learned, context_length: 4, d: 3}\n  - {name: l, type: nn.linear, d_in: 3, d_out: 2}\n"))
	f.Add([]byte("name: m\nlayers:\n  - name: a\n    type: attention.self\n    d_in: 3\n    d_out: 2\n    weights: matrix\n"))
	f.Add([]byte("name: m\ninputs: [{name: ids, dtype: int64}, {name: mask, dtype: int64}]\nlayers:\n  - {name: e, type: nn.embedding, num_embeddings: 7, embedding_dim: 3, padding_idx: 0, inputs: [ids]}\n  - {name: p, type: pool.mean, inputs: [e, mask]}\n  - {name: h, type: nn.linear, d_in: 3, d_out: 7, tied_weight: e.weight, inputs: [e]}\n"))
	f.Add([]byte("name: [\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Options{MaxMemory: 64 << 20}.Parse(data, "fuzz.yaml")
		if err != nil {
			return
		}
		if m.NumParams() > 1<<16 {
			return // a valid but large model: building it is enough
		}
		if err := m.Init(1); err != nil {
			return
		}
		inputs := make([]*tensor.Dense, len(m.Config().Inputs))
		for i := range inputs {
			if m.Config().InputDtype(i) == tensor.Int64 {
				inputs[i] = tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]int64{1, 0, 3, 4, 5, 6}))
				continue
			}
			inputs[i] = tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6}))
		}
		_, _ = m.Forward(nil, inputs...)
	})
}
