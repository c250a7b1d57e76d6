package layers

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name  string
		layer registry.Layer
		want  string
	}{
		{"self d_in", &Self{DIn: 0, DOut: 2, Weights: "linear"}, "d_in must be positive, got 0"},
		{"self d_out", &Self{DIn: 3, DOut: -1, Weights: "linear"}, "d_out must be positive, got -1"},
		{"self weights", &Self{DIn: 3, DOut: 2, Weights: "foo"}, `weights must be "linear" or "matrix", got "foo"`},
		{"self empty weights", &Self{DIn: 3, DOut: 2}, `weights must be "linear" or "matrix", got ""`},
		{"self matrix bias", &Self{DIn: 3, DOut: 2, Weights: "matrix", QKVBias: true}, "qkv_bias needs weights: linear"},
		{"causal d_in", &Causal{DOut: 2, ContextLength: 6}, "d_in must be positive, got 0"},
		{"causal context_length", &Causal{DIn: 3, DOut: 2}, "context_length must be positive, got 0"},
		{"causal dropout high", &Causal{DIn: 3, DOut: 2, ContextLength: 6, Dropout: 1.5}, "dropout must be in [0, 1), got 1.5"},
		{"causal dropout one", &Causal{DIn: 3, DOut: 2, ContextLength: 6, Dropout: 1}, "dropout must be in [0, 1), got 1"},
		{"causal dropout negative", &Causal{DIn: 3, DOut: 2, ContextLength: 6, Dropout: -0.1}, "dropout must be in [0, 1), got -0.1"},
		{"causal dropout NaN", &Causal{DIn: 3, DOut: 2, ContextLength: 6, Dropout: math.NaN()}, "dropout must be in [0, 1), got NaN"},
		{"wrapper num_heads", &MultiHeadWrapper{DIn: 3, DOut: 2, ContextLength: 6}, "num_heads must be positive, got 0"},
		{"wrapper d_out", &MultiHeadWrapper{DIn: 3, ContextLength: 6, NumHeads: 2}, "d_out must be positive, got 0"},
		{"wrapper dropout", &MultiHeadWrapper{DIn: 3, DOut: 2, ContextLength: 6, NumHeads: 2, Dropout: 2}, "dropout must be in [0, 1), got 2"},
		{"wrapper num_heads limit", &MultiHeadWrapper{DIn: 1, DOut: 1, ContextLength: 1, NumHeads: 1 << 20}, "num_heads 1048576 is above the limit of 65536"},
		{"multihead divides", &MultiHead{DIn: 3, DOut: 8, ContextLength: 6, NumHeads: 3}, "num_heads 3 does not divide d_out 8"},
		{"multihead num_heads", &MultiHead{DIn: 3, DOut: 8, ContextLength: 6}, "num_heads must be positive, got 0"},
		{"multihead context_length", &MultiHead{DIn: 3, DOut: 8, NumHeads: 2}, "context_length must be positive, got 0"},
		{"multihead dropout", &MultiHead{DIn: 3, DOut: 8, ContextLength: 6, NumHeads: 2, Dropout: 1.5}, "dropout must be in [0, 1), got 1.5"},
		{"position context_length", &LearnedPosition{D: 3}, "context_length must be positive, got 0"},
		{"position d", &LearnedPosition{ContextLength: 6}, "d must be positive, got 0"},
		{"linear d_in", &Linear{DOut: 2}, "d_in must be positive, got 0"},
		{"linear d_out", &Linear{DIn: 2}, "d_out must be positive, got 0"},
		{"linear too large", &Linear{DIn: 1 << 20, DOut: 1 << 20}, "parameter weight of shape (1048576, 1048576) needs 4 TiB, over the memory budget of 4 GiB"},
		{"multihead too large", &MultiHead{DIn: 1 << 16, DOut: 1 << 16, ContextLength: 6, NumHeads: 1}, "storage for 4 parameters (the largest: W_query.weight of shape (65536, 65536)) needs 64 GiB, over the memory budget of 4 GiB"},
		{"dropout p", &Dropout{P: 1.5}, "p must be in [0, 1), got 1.5"},
		{"dropout p one", &Dropout{P: 1}, "p must be in [0, 1), got 1"},
		{"dropout p rounds to one", &Dropout{P: 1 - 1e-12}, "p must be in [0, 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.layer.Validate()
			require.ErrorContains(t, err, tt.want)
			require.Empty(t, tt.layer.Params(), "a failed Validate left parameters")
		})
	}
}

func TestForwardErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := func(shape ...int) []*tensor.Dense { return []*tensor.Dense{randomDense(rng, shape...)} }
	self := func() registry.Layer { return &Self{DIn: 3, DOut: 2, Weights: "linear", Scaled: true} }
	causal := func() registry.Layer { return &Causal{DIn: 3, DOut: 2, ContextLength: 6} }
	tests := []struct {
		name   string
		layer  func() registry.Layer
		run    *registry.Run
		inputs []*tensor.Dense
		want   string
	}{
		{"d_in mismatch", self, nil, x(6, 4), "d_in mismatch: input last dim 4, layer expects d_in 3"},
		{"d_in mismatch batched", causal, nil, x(2, 6, 4), "d_in mismatch: input last dim 4, layer expects d_in 3"},
		{"wrapper d_in mismatch", func() registry.Layer {
			return &MultiHeadWrapper{DIn: 3, DOut: 2, ContextLength: 6, NumHeads: 2}
		}, nil, x(6, 5), "d_in mismatch: input last dim 5, layer expects d_in 3"},
		{"multihead d_in mismatch", func() registry.Layer {
			return &MultiHead{DIn: 3, DOut: 4, ContextLength: 6, NumHeads: 2}
		}, nil, x(6, 4), "d_in mismatch: input last dim 4, layer expects d_in 3"},
		{"linear d_in mismatch", func() registry.Layer { return &Linear{DIn: 3, DOut: 2} }, nil, x(6, 4), "d_in mismatch: input last dim 4, layer expects d_in 3"},
		{"position d mismatch", func() registry.Layer { return &LearnedPosition{ContextLength: 6, D: 3} }, nil, x(6, 4), "d mismatch: input last dim 4, layer expects d 3"},
		{"rank 1", self, nil, x(3), "input shape (3,): want (T, d) or (B, T, d)"},
		{"rank 4", self, nil, x(1, 2, 6, 3), "input shape (1, 2, 6, 3): want (T, d) or (B, T, d)"},
		{"simple rank 4", func() registry.Layer { return &Simple{} }, nil, x(1, 2, 6, 3), "want (T, d) or (B, T, d)"},
		{"nil input", self, nil, []*tensor.Dense{nil}, "input is nil"},
		{"float64 input", self, nil, []*tensor.Dense{tensor.New(tensor.WithShape(6, 3), tensor.Of(tensor.Float64))}, "input dtype float64: want float32"},
		{"empty input", self, nil, []*tensor.Dense{tensor.New(tensor.WithShape(0, 3), tensor.Of(tensor.Float32))}, "input shape (0, 3) has an empty dimension"},
		{"no inputs", self, nil, nil, "takes 1 input, got 0"},
		{"two inputs", causal, nil, append(x(6, 3), x(6, 3)...), "takes 1 input, got 2"},
		{"causal too long", causal, nil, x(7, 3), "sequence length 7 exceeds context_length 6"},
		{"causal too long batched", causal, nil, x(2, 7, 3), "sequence length 7 exceeds context_length 6"},
		{"wrapper too long", func() registry.Layer {
			return &MultiHeadWrapper{DIn: 3, DOut: 2, ContextLength: 6, NumHeads: 2}
		}, nil, x(7, 3), "sequence length 7 exceeds context_length 6"},
		{"multihead too long", func() registry.Layer {
			return &MultiHead{DIn: 3, DOut: 4, ContextLength: 6, NumHeads: 2}
		}, nil, x(7, 3), "sequence length 7 exceeds context_length 6"},
		{"position too long", func() registry.Layer { return &LearnedPosition{ContextLength: 6, D: 3} }, nil, x(7, 3), "sequence length 7 exceeds context_length 6"},
		{"attention dropout without RNG", func() registry.Layer {
			return &Causal{DIn: 3, DOut: 2, ContextLength: 6, Dropout: 0.1}
		}, &registry.Run{Train: true}, x(6, 3), "dropout 0.1 in train mode needs run.RNG"},
		{"multihead dropout without RNG", func() registry.Layer {
			return &MultiHead{DIn: 3, DOut: 4, ContextLength: 6, NumHeads: 2, Dropout: 0.2}
		}, &registry.Run{Train: true}, x(6, 3), "dropout 0.2 in train mode needs run.RNG"},
		{"nn.dropout without RNG", func() registry.Layer { return &Dropout{P: 0.5} }, &registry.Run{Train: true}, x(6, 3), "p 0.5 in train mode needs run.RNG"},
		{"concat no inputs", func() registry.Layer { return &Concat{} }, nil, nil, "takes 1 or more inputs, got 0"},
		{"concat leading dims", func() registry.Layer { return &Concat{} }, nil, append(x(2, 6, 3), x(2, 5, 3)...),
			"input 1 has shape (2, 5, 3), want the leading dimensions of input 0 (2, 6, 3)"},
		{"concat rank", func() registry.Layer { return &Concat{} }, nil, append(x(6, 3), x(1, 6, 3)...),
			"input 1 has shape (1, 6, 3), want the leading dimensions of input 0 (6, 3)"},
		{"concat bad input", func() registry.Layer { return &Concat{} }, nil, append(x(6, 3), x(6)...), "input 1: input shape (6,)"},
		{"add no inputs", func() registry.Layer { return &Add{} }, nil, nil, "takes 1 or more inputs, got 0"},
		{"add shape", func() registry.Layer { return &Add{} }, nil, append(x(6, 3), x(6, 4)...),
			"input 1 has shape (6, 4), want the shape of input 0 (6, 3)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.layer()
			require.NoError(t, l.Validate())
			run := tt.run
			if run == nil {
				run = &registry.Run{}
			}
			out, err := l.Forward(run, tt.inputs)
			require.ErrorContains(t, err, tt.want)
			require.Nil(t, out)
		})
	}
}

// TestForwardBeforeValidate checks that layers with parameters refuse to
// run (instead of panicking) until Validate has succeeded.
func TestForwardBeforeValidate(t *testing.T) {
	input := []*tensor.Dense{randomDense(rand.New(rand.NewPCG(1, 1)), 6, 3)}
	for _, l := range []registry.Layer{
		&Self{DIn: 3, DOut: 2, Weights: "linear"},
		&Causal{DIn: 3, DOut: 2, ContextLength: 6},
		&MultiHeadWrapper{DIn: 3, DOut: 2, ContextLength: 6, NumHeads: 2},
		&MultiHead{DIn: 3, DOut: 2, ContextLength: 6, NumHeads: 2},
		&LearnedPosition{ContextLength: 6, D: 3},
		&Linear{DIn: 3, DOut: 2},
	} {
		_, err := l.Forward(&registry.Run{}, input)
		require.ErrorContains(t, err, "before a successful Validate", "%T", l)
		require.Empty(t, l.Params(), "%T", l)
	}
}
