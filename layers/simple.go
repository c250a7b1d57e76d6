package layers

import (
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Simple is attention.simple, self-attention without trainable weights: the
// input serves as queries, keys and values, softmax(X Xᵀ) X. PyTorch has no
// module for it; it equals torch.softmax(x @ x.transpose(-2, -1), dim=-1) @ x,
// the first attention of the seed notebooks.
type Simple struct {
	noParams `yaml:"-"` // the layer has no parameters.
	// Scaled divides the scores by √d, d the input width.
	Scaled bool `yaml:"scaled"`
	// Causal lets token t attend to tokens ≤ t only.
	Causal bool `yaml:"causal"`
}

var (
	_ registry.Layer        = (*Simple)(nil)
	_ registry.OutputShaper = (*Simple)(nil)
	_ registry.FLOPCounter  = (*Simple)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "attention.simple",
		Summary: "self-attention without weights: softmax(X Xᵀ) X, optionally scaled and causal",
		New:     func() registry.Layer { return &Simple{} },
	})
}

// Validate accepts every configuration: both fields are plain switches.
func (s *Simple) Validate() error { return nil }

// Forward attends over the input, of any width, and returns (T, d) or
// (B, T, d) like its input.
func (s *Simple) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := singleInput(inputs)
	if err != nil {
		return nil, err
	}
	scale := float32(1)
	if s.Scaled {
		scale = invSqrt(in.D)
	}
	opt, err := attentionOptions(run, scale, s.Causal, 0)
	if err != nil {
		return nil, err
	}
	weights, w, err := newWeights(run, in, 1)
	if err != nil {
		return nil, err
	}
	out, data := in.newOutput(run, in.D)
	sc := getScratch(0) // for the head views
	defer sc.release()
	heads{
		q: in.data, k: in.data, v: in.data, out: data,
		ldq: in.D, ldk: in.D, ldv: in.D, ldOut: in.D,
		seqs: in.B, tokens: in.T, count: 1,
		dk: in.D, dv: in.D,
	}.attendAll(opt, w, sc)
	observe(run, weights)
	return out, nil
}

// OutputShape is the input's shape: the attention keeps the width.
func (s *Simple) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "", 0)
}

// FLOPs counts QKᵀ and the weights times X over the input itself:
// 4·B·T²·d.
func (s *Simple) FLOPs(inputs []tensor.Shape) (int64, error) {
	x, err := oneFLOPInput(inputs, "", 0)
	if err != nil {
		return 0, err
	}
	var c flopCount
	c.attention(x.B, 1, x.T, x.T, x.D, x.D)
	return c.result()
}
