package layers

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// attentionLayer is an attention layer configuration for the property tests.
type attentionLayer struct {
	name   string
	new    func() registry.Layer // unvalidated; d_in 4 where it has one
	causal bool
}

// attentionLayers lists every attention layer in the configurations the
// properties are checked for.
var attentionLayers = []attentionLayer{
	{"simple", func() registry.Layer { return &Simple{} }, false},
	{"simple scaled", func() registry.Layer { return &Simple{Scaled: true} }, false},
	{"simple causal", func() registry.Layer { return &Simple{Causal: true} }, true},
	{"self linear", func() registry.Layer { return &Self{DIn: 4, DOut: 3, Weights: "linear", Scaled: true} }, false},
	{"self linear bias unscaled", func() registry.Layer {
		return &Self{DIn: 4, DOut: 3, Weights: "linear", QKVBias: true}
	}, false},
	{"self matrix causal", func() registry.Layer {
		return &Self{DIn: 4, DOut: 3, Weights: "matrix", Scaled: true, Causal: true}
	}, true},
	{"causal", func() registry.Layer { return &Causal{DIn: 4, DOut: 3, ContextLength: 8, QKVBias: true} }, true},
	{"multihead_wrapper", func() registry.Layer {
		return &MultiHeadWrapper{DIn: 4, DOut: 2, ContextLength: 8, NumHeads: 3}
	}, true},
	{"multihead", func() registry.Layer {
		return &MultiHead{DIn: 4, DOut: 6, ContextLength: 8, NumHeads: 2, OutBias: true, Causal: true}
	}, true},
	{"multihead non-causal", func() registry.Layer {
		return &MultiHead{DIn: 4, DOut: 6, ContextLength: 8, NumHeads: 3, QKVBias: true}
	}, false},
	{"average", func() registry.Layer { return &Average{} }, true},
}

func TestAttentionWeightRowsSumToOne(t *testing.T) {
	for _, tt := range attentionLayers {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			l := validated(t, tt.new(), 3)
			_, weights := forward(t, randomDense(rng, 2, 5, 4), l)
			require.NotNil(t, weights, "the hook received no weights")
			shape := weights.Shape()
			require.Equal(t, []int{2, 5}, []int{shape[0], shape[2]})
			w := floats(weights)
			for row := 0; row < len(w)/5; row++ {
				var sum float64
				for j, v := range w[row*5 : row*5+5] {
					require.GreaterOrEqual(t, v, float32(0))
					if tt.causal && j > row%5 {
						require.Zero(t, v, "weight of a future token, row %d col %d", row%5, j)
					}
					sum += float64(v)
				}
				require.InDelta(t, 1, sum, 1e-6, "row %d", row)
			}
		})
	}
}

// TestCausalOutputIgnoresLaterTokens changes every token after t and
// requires outputs 0..t to stay bit for bit the same.
func TestCausalOutputIgnoresLaterTokens(t *testing.T) {
	const T, d = 6, 4
	for _, tt := range attentionLayers {
		if !tt.causal {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(4, 5))
			l := validated(t, tt.new(), 6)
			x := randomDense(rng, 2, T, d)
			base, _ := forward(t, x, l)
			width := base.Shape()[2]
			for pos := 0; pos < T-1; pos++ {
				changed := x.Clone().(*tensor.Dense)
				data := floats(changed)
				for b := 0; b < 2; b++ {
					for i := (b*T + pos + 1) * d; i < (b+1)*T*d; i++ {
						data[i] = 3*rng.Float32() - 1.5
					}
				}
				out, _ := forward(t, changed, l)
				for b := 0; b < 2; b++ {
					rows := func(o *tensor.Dense) []float32 {
						return floats(o)[b*T*width : (b*T+pos+1)*width]
					}
					require.Equal(t, rows(base), rows(out), "sequence %d, tokens 0..%d", b, pos)
				}
				// The changed tokens themselves must matter, or the test proves nothing.
				require.NotEqual(t, floats(base), floats(out))
			}
		})
	}
}

// TestNonCausalAttentionIsPermutationEquivariant permutes the tokens and
// requires the outputs to be permuted the same way.
func TestNonCausalAttentionIsPermutationEquivariant(t *testing.T) {
	const T, d = 7, 4
	for _, tt := range attentionLayers {
		if tt.causal {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			l := validated(t, tt.new(), 9)
			x := randomDense(rng, T, d)
			out, _ := forward(t, x, l)
			width := out.Shape()[1]
			for trial := 0; trial < 5; trial++ {
				perm := rng.Perm(T)
				px := permuteRows(x, perm)
				pout, _ := forward(t, px, l)
				assertClose(t, floats(permuteRows(out, perm)), floats(pout), 1e-6, 0, "permuted output")
				require.Equal(t, []int{T, width}, []int(pout.Shape()))
			}
		})
	}
}

// permuteRows returns x with row i taken from row perm[i].
func permuteRows(x *tensor.Dense, perm []int) *tensor.Dense {
	width := x.Shape()[1]
	src := floats(x)
	dst := make([]float32, len(src))
	for i, p := range perm {
		copy(dst[i*width:(i+1)*width], src[p*width:(p+1)*width])
	}
	return newDense([]int{len(perm), width}, dst)
}

// TestBatchedEqualsPerSample runs every single-input layer on a batch and
// on each of its sequences alone.
func TestBatchedEqualsPerSample(t *testing.T) {
	const B, T, d = 3, 5, 4
	layers := slices.Clone(attentionLayers)
	layers = append(layers,
		attentionLayer{name: "position.learned", new: func() registry.Layer { return &LearnedPosition{ContextLength: 6, D: d} }},
		attentionLayer{name: "nn.linear", new: func() registry.Layer { return &Linear{DIn: d, DOut: 3, Bias: true} }},
		attentionLayer{name: "nn.dropout (eval)", new: func() registry.Layer { return &Dropout{P: 0.5} }},
	)
	for _, tt := range layers {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(10, 11))
			l := validated(t, tt.new(), 12)
			x := randomDense(rng, B, T, d)
			before := slices.Clone(floats(x))
			out, weights := forward(t, x, l)
			require.Equal(t, before, floats(x), "Forward modified its input")
			require.Equal(t, B, out.Shape()[0])
			width := out.Shape()[2]
			for b := 0; b < B; b++ {
				sample := newDense([]int{T, d}, slices.Clone(floats(x)[b*T*d:(b+1)*T*d]))
				one, oneWeights := forward(t, sample, l)
				require.Equal(t, []int{T, width}, []int(one.Shape()))
				assertClose(t, floats(out)[b*T*width:(b+1)*T*width], floats(one), 1e-6, 0, "sequence output")
				if weights != nil {
					per := len(floats(oneWeights))
					assertClose(t, floats(weights)[b*per:(b+1)*per], floats(oneWeights), 1e-6, 0, "sequence weights")
				}
			}
		})
	}
}

// TestDropoutLayer checks nn.dropout: about p of the values zeroed, the rest
// scaled by exactly 1/(1-p), the same mask for the same seed, and the
// identity in eval mode.
func TestDropoutLayer(t *testing.T) {
	const n = 20000
	for _, p := range []float64{0.1, 0.5, 0.8} {
		l := &Dropout{P: p}
		require.NoError(t, l.Validate())
		x := randomDense(rand.New(rand.NewPCG(1, 1)), 200, n/200)
		train := func(seed uint64) *tensor.Dense {
			run := &registry.Run{Train: true, RNG: rand.New(rand.NewPCG(seed, 0))}
			out, err := l.Forward(run, []*tensor.Dense{x})
			require.NoError(t, err)
			return out
		}
		out := train(42)
		keep := 1 / (1 - float32(p))
		zeros := 0
		for i, v := range floats(out) {
			if v == 0 {
				zeros++
				continue
			}
			require.Equal(t, floats(x)[i]*keep, v, "kept value %d not scaled by 1/(1-p)", i)
		}
		requireAboutP(t, zeros, n, p)
		require.Equal(t, floats(out), floats(train(42)), "same seed, different mask")
		require.NotEqual(t, floats(out), floats(train(43)), "different seeds, same mask")

		eval, err := l.Forward(&registry.Run{}, []*tensor.Dense{x})
		require.NoError(t, err)
		require.Equal(t, floats(x), floats(eval), "eval mode must be the identity")
	}
}

// TestAttentionDropout checks dropout on the attention weights of every
// layer that has it: in train mode about p of the (unmasked) weights are
// zeroed and the rest are the eval weights scaled by exactly 1/(1-p); in
// eval mode the layer equals the same layer without dropout.
func TestAttentionDropout(t *testing.T) {
	const p = 0.4
	layers := []attentionLayer{
		{"causal", func() registry.Layer { return &Causal{DIn: 4, DOut: 3, ContextLength: 40, Dropout: p} }, true},
		{"multihead_wrapper", func() registry.Layer {
			return &MultiHeadWrapper{DIn: 4, DOut: 2, ContextLength: 40, NumHeads: 2, Dropout: p}
		}, true},
		{"multihead", func() registry.Layer {
			return &MultiHead{DIn: 4, DOut: 4, ContextLength: 40, NumHeads: 2, Dropout: p, Causal: true, OutBias: true}
		}, true},
		{"multihead non-causal", func() registry.Layer {
			return &MultiHead{DIn: 4, DOut: 4, ContextLength: 40, NumHeads: 2, Dropout: p}
		}, false},
	}
	for _, tt := range layers {
		t.Run(tt.name, func(t *testing.T) {
			const B, T = 2, 40
			l := validated(t, tt.new(), 13)
			x := randomDense(rand.New(rand.NewPCG(14, 15)), B, T, 4)
			evalOut, evalWeights := forward(t, x, l)

			// Same parameters, no dropout: eval mode must not differ.
			plain := tt.new()
			setDropout(plain, 0)
			require.NoError(t, plain.Validate())
			for i, pp := range plain.Params() {
				copy(floats(pp.Value), floats(l.Params()[i].Value))
			}
			plainOut, _ := forward(t, x, plain)
			require.Equal(t, floats(plainOut), floats(evalOut), "eval mode must ignore dropout")

			var trainWeights *tensor.Dense
			run := &registry.Run{Train: true, RNG: rand.New(rand.NewPCG(16, 0)), Layer: "attn",
				Hook: func(_ string, w *tensor.Dense) { trainWeights = w }}
			trainOut, err := l.Forward(run, []*tensor.Dense{x})
			require.NoError(t, err)
			require.NotEqual(t, floats(evalOut), floats(trainOut))

			keep := 1 / (1 - float32(p))
			zeros, visible := 0, 0
			ew, tw := floats(evalWeights), floats(trainWeights)
			for i := range ew {
				q, k := (i/T)%T, i%T
				if tt.causal && k > q {
					require.Zero(t, tw[i])
					continue
				}
				visible++
				if tw[i] == 0 {
					zeros++
					continue
				}
				require.Equal(t, ew[i]*keep, tw[i], "kept weight %d not scaled by 1/(1-p)", i)
			}
			requireAboutP(t, zeros, visible, p)
		})
	}
}

// setDropout sets the dropout field of an attention layer.
func setDropout(l registry.Layer, p float64) {
	switch l := l.(type) {
	case *Causal:
		l.Dropout = p
	case *MultiHeadWrapper:
		l.Dropout = p
	case *MultiHead:
		l.Dropout = p
	}
}

// requireAboutP checks that zeros out of n draws is within 5 standard
// deviations of p·n (the seeds are fixed, so this never flakes; a wrong
// probability is far outside).
func requireAboutP(t *testing.T, zeros, n int, p float64) {
	t.Helper()
	sd := math.Sqrt(float64(n) * p * (1 - p))
	require.InDelta(t, p*float64(n), float64(zeros), 5*sd, "zeroed %d of %d with p = %g", zeros, n, p)
}

// TestConcurrentForward runs one layer from several goroutines, as a served
// model does, and requires every pass to match a lone pass (run with -race
// to also catch shared writes).
func TestConcurrentForward(t *testing.T) {
	for _, tt := range attentionLayers {
		t.Run(tt.name, func(t *testing.T) {
			l := validated(t, tt.new(), 17)
			x := randomDense(rand.New(rand.NewPCG(18, 19)), 2, 6, 4)
			want, err := l.Forward(&registry.Run{}, []*tensor.Dense{x})
			require.NoError(t, err)
			outs := make([]*tensor.Dense, 4)
			errs := make([]error, len(outs))
			var wg sync.WaitGroup
			for i := range outs {
				wg.Go(func() { outs[i], errs[i] = l.Forward(&registry.Run{}, []*tensor.Dense{x}) })
			}
			wg.Wait()
			for i, out := range outs {
				require.NoError(t, errs[i])
				require.Equal(t, floats(want), floats(out), "pass %d", i)
			}
		})
	}
}
