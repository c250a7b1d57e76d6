// Package cosine is an attnrun layer written outside attnrun:
// attention.cosine, single-head attention scored by scaled cosine
// similarity. It shows everything a layer from another module needs: a
// config struct, Validate, named parameters with PyTorch's init, a Forward
// that reports its attention weights, and registration in init (this
// file); ONNX export (export.go); a lifting pattern that lets `attnrun
// import` recognize the layer in PyTorch's ONNX exports (lift.go);
// incremental decoding with a KV cache (step.go); and a FLOP count
// (flops.go). A blank import makes the layer available to model configs
// and to a custom attnrun binary (see cmd/attnrun-cosine):
//
//	import _ "github.com/attnrun/attnrun/examples/cosine"
//
// The layer computes, for queries q = x W_qᵀ (+ b_q), keys k and values v
// alike,
//
//	weights = softmax(scale · q̂ k̂ᵀ)   (future keys masked when causal)
//	output  = weights · v
//
// where x̂ = x / max(‖x‖₂, 1e-12), exactly F.normalize(x, dim=-1) in
// PyTorch: a zero vector stays zero and scores 0 against every key. Cosine
// scores lie in [-scale, scale], so scale plays the part of an inverse
// temperature; testdata/reference.py is the PyTorch twin.
package cosine

import (
	"errors"
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/attnmath"
	"github.com/attnrun/attnrun/registry"
)

func init() {
	registry.Register(registry.Info{
		ID:      "attention.cosine",
		Summary: "single-head attention scored by scaled cosine similarity of queries and keys",
		New:     func() registry.Layer { return &Cosine{Scale: 10} },
	})
}

// Cosine is attention.cosine. Its exported fields are its configuration,
// decoded from the model YAML by their yaml tags; the unexported ones are
// set by Validate.
type Cosine struct {
	// DIn is the width of the input tokens.
	DIn int `yaml:"d_in"`
	// DOut is the width of queries, keys, values and the output.
	DOut int `yaml:"d_out"`
	// Scale multiplies the cosine scores before the softmax (default 10).
	Scale float64 `yaml:"scale"`
	// Causal lets token t attend to tokens ≤ t only.
	Causal bool `yaml:"causal"`
	// QKVBias gives the three projections a bias.
	QKVBias bool `yaml:"qkv_bias"`

	query, key, value *linear
}

// The interface guard: the build fails here if Cosine stops being a layer.
var _ registry.Layer = (*Cosine)(nil)

// errNotValidated is returned by Forward before a successful Validate, when
// the parameters do not exist yet.
var errNotValidated = errors.New("layer used before a successful Validate")

// Validate checks the configuration and allocates zeroed parameters. Errors
// name the field and the rule; the model adds the file, line and layer.
func (c *Cosine) Validate() error {
	c.query, c.key, c.value = nil, nil, nil
	switch {
	case c.DIn <= 0:
		return fmt.Errorf("d_in must be positive, got %d", c.DIn)
	case c.DOut <= 0:
		return fmt.Errorf("d_out must be positive, got %d", c.DOut)
	case !(c.Scale > 0) || math.IsInf(c.Scale, 1):
		return fmt.Errorf("scale must be a finite number > 0, got %g", c.Scale)
	}
	var ps [3]*linear
	for i := range ps {
		var err error
		if ps[i], err = newLinear(c.DIn, c.DOut, c.QKVBias); err != nil {
			return err
		}
	}
	c.query, c.key, c.value = ps[0], ps[1], ps[2]
	return nil
}

// Params lists W_query, W_key and W_value, each weight before its bias:
// the names and order of the PyTorch module's state_dict, and the init of
// its nn.Linear.
func (c *Cosine) Params() []registry.Param {
	if c.query == nil {
		return nil
	}
	ps := c.query.params("W_query")
	ps = append(ps, c.key.params("W_key")...)
	return append(ps, c.value.params("W_value")...)
}

// Forward maps (T, d_in) or (B, T, d_in) to (T, d_out) or (B, T, d_out).
// When the run wants attention weights, it hands them to run.Observe as
// (B, 1, T, T), zero above the diagonal when causal.
func (c *Cosine) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if c.query == nil {
		return nil, errNotValidated
	}
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	// The sizes come from the parameters, which Validate made to measure,
	// not from the fields, which a caller could change afterwards.
	dIn, dOut := c.query.in, c.query.out
	x, err := readTokens(inputs[0], dIn)
	if err != nil {
		return nil, err
	}
	rows := x.B * x.T
	if err := checkSize("queries, keys and values", rows, dOut); err != nil {
		return nil, err
	}
	q, k, v, err := c.project(x.data, rows)
	if err != nil {
		return nil, err
	}
	var weights []float32
	if run.WantWeights() {
		if err := checkSize("attention weights", rows, x.T); err != nil {
			return nil, err
		}
		weights = make([]float32, rows*x.T)
	}
	out := make([]float32, rows*dOut)
	if err := attnmath.Attend(out, q, k, v, c.attention(x.B, x.T, x.T, c.Causal, weights)); err != nil {
		return nil, err
	}
	if weights != nil {
		run.Observe(tensor.New(tensor.WithShape(x.B, 1, x.T, x.T), tensor.WithBacking(weights)))
	}
	return tensor.New(tensor.WithShape(x.shape(dOut)...), tensor.WithBacking(out)), nil
}
