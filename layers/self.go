package layers

import (
	"fmt"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Self is attention.self, single-head scaled dot-product self-attention with
// trainable query, key and value projections. With weights "linear" it
// equals the seeds' SelfAttention_v2 (three nn.Linear); with "matrix" it
// equals SelfAttention_v1 (three bare nn.Parameter matrices, x @ W).
type Self struct {
	// DIn is the width of the input tokens.
	DIn int `yaml:"d_in"`
	// DOut is the width of queries, keys, values and the output.
	DOut int `yaml:"d_out"`
	// Weights is "linear" (nn.Linear, weight (d_out, d_in); the default) or
	// "matrix" (bare parameter (d_in, d_out), initialized like torch.rand).
	Weights string `yaml:"weights"`
	// QKVBias gives the three nn.Linear a bias; only with weights "linear".
	QKVBias bool `yaml:"qkv_bias"`
	// Causal lets token t attend to tokens ≤ t only.
	Causal bool `yaml:"causal"`
	// Scaled divides the scores by √d_out (the default); false keeps the
	// raw scores.
	Scaled bool `yaml:"scaled"`

	head          *head
	packedWeights `yaml:"-"` // the packed copies of the weights (packs.go), ParamsChanged
}

var (
	_ registry.Provisioner  = (*Self)(nil)
	_ registry.OutputShaper = (*Self)(nil)
	_ registry.FLOPCounter  = (*Self)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "attention.self",
		Summary: "single-head self-attention with trainable Wq, Wk, Wv (SelfAttention_v1/v2)",
		New:     func() registry.Layer { return &Self{Weights: "linear", Scaled: true} },
	})
}

// Validate checks the sizes and the weights kind, and allocates zeroed
// parameters.
func (s *Self) Validate() error { return s.Provision(nil) }

// PlanParams lists the projections' parameters without allocating them.
func (s *Self) PlanParams() ([]registry.ParamShape, error) { return planParams(s.prepare) }

// Provision checks the fields and allocates zeroed parameters from mem.
func (s *Self) Provision(mem registry.Memory) (err error) {
	s.head, s.packs, err = provisionPacked(mem, s.prepare)
	return err
}

func (s *Self) prepare(a paramAlloc) (*head, error) {
	err := firstError(positive("d_in", s.DIn), positive("d_out", s.DOut))
	if err != nil {
		return nil, err
	}
	matrix := s.Weights == "matrix"
	if s.Weights != "linear" && !matrix {
		return nil, fmt.Errorf("weights must be \"linear\" or \"matrix\", got %q", s.Weights)
	}
	if matrix && s.QKVBias {
		return nil, fmt.Errorf("qkv_bias needs weights: linear")
	}
	proj, err := newQKV(a, "", s.DIn, s.DOut, matrix, s.QKVBias)
	if err != nil {
		return nil, err
	}
	scale := float32(1)
	if s.Scaled {
		scale = invSqrt(s.DOut)
	}
	return &head{proj: proj, scale: scale, causal: s.Causal}, nil
}

// Params lists W_query, W_key and W_value: each nn.Linear's weight then
// bias, or the three bare matrices.
func (s *Self) Params() []registry.Param {
	if s.head == nil {
		return nil
	}
	return s.head.proj.params("")
}

// Forward maps (T, d_in) or (B, T, d_in) to (T, d_out) or (B, T, d_out).
func (s *Self) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if s.head == nil {
		return nil, errNotValidated
	}
	return s.head.forward(run, inputs)
}

// OutputShape is the input's shape with width d_out.
func (s *Self) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return widthShape(inputs, "d_in", s.DIn, 0, s.DOut)
}

// FLOPs counts the three projections and the attention products:
// 2·B·T·d_in·3·d_out + 4·B·T²·d_out.
func (s *Self) FLOPs(inputs []tensor.Shape) (int64, error) {
	return headFLOPs(inputs, 1, s.DIn, s.DOut)
}
