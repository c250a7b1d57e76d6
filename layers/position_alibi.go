package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/internal/attn"
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// ALiBi is position.alibi, the attention bias of Press et al. ("Train
// Short, Test Long"): head h adds m_h·(j − i) to the score of query i and
// key j, with the paper's geometric slopes m_h (alibiSlopes). Its output is
// the bias itself, (H, T, T) for a (T, d) or (B, T, d) input, to be given to
// an attention layer as an additive float mask: attention.sdpa with
// mask: additive broadcasts it over the batch, and nn.MultiheadAttention
// reads a 3-D attn_mask as (B·H, T, T), which it is for B = 1. With causal
// set, keys after the query are −Inf, so the output is the whole mask, as
// BLOOM builds it.
//
// m·(j − i) differs from BLOOM's m·j (Hugging Face build_alibi_tensor) by
// m·i, the same for every key of a query, so both give the same softmax.
// Inside attention.sdpa the `alibi: true` option adds the same bias without
// materializing it.
type ALiBi struct {
	noParams `yaml:"-"` // the slopes are fixed, not learned.
	// NumHeads is the number of attention heads, which fixes the slopes.
	NumHeads int `yaml:"num_heads"`
	// Causal also masks the keys after each query with −Inf.
	Causal bool `yaml:"causal"`

	slopes []float32
}

var (
	_ registry.Layer        = (*ALiBi)(nil)
	_ registry.Stepper      = (*ALiBi)(nil)
	_ registry.OutputShaper = (*ALiBi)(nil)
	_ registry.FLOPCounter  = (*ALiBi)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "position.alibi",
		Summary: "ALiBi attention bias: per-head slope × (key − query position), as an additive mask",
		New:     func() registry.Layer { return &ALiBi{} },
	})
}

// Validate checks num_heads and computes the slopes.
func (a *ALiBi) Validate() error {
	a.slopes = nil
	if err := positive("num_heads", a.NumHeads); err != nil {
		return err
	}
	if a.NumHeads > maxHeads {
		return fmt.Errorf("num_heads %d is above the limit of %d", a.NumHeads, maxHeads)
	}
	a.slopes = alibiSlopes(a.NumHeads)
	return nil
}

// Forward returns the (H, T, T) bias for the input's T tokens.
func (a *ALiBi) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := readyInput(a.slopes != nil, inputs)
	if err != nil {
		return nil, err
	}
	return a.bias(0, in.T)
}

// NewState starts a session at position 0.
func (a *ALiBi) NewState() registry.State { return &positionState{} }

// Step returns the bias of the n new queries against every key so far,
// (H, n, Tokens()+n): the mask an attention layer's step expects.
func (a *ALiBi) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if a.slopes == nil {
		return nil, errNotValidated
	}
	return positionStep(run, state, inputs, func(_ *registry.Run, in seqs, past int) (*tensor.Dense, error) {
		return a.bias(past, in.T)
	})
}

// bias builds the (H, n, past+n) bias of queries at positions past..past+n−1
// against keys at 0..past+n−1.
func (a *ALiBi) bias(past, n int) (*tensor.Dense, error) {
	tk := past + n
	out, err := newZeros("alibi bias", len(a.slopes), n, tk)
	if err != nil {
		return nil, err
	}
	data := floats(out)
	bias := attn.Bias{Frontier: attn.Frontier{Causal: a.Causal, Left: -1, Right: -1}, Slopes: a.slopes}
	for h := range a.slopes {
		for i := range n {
			bias.Row(data[(h*n+i)*tk:(h*n+i+1)*tk], 0, h, i, past+i, 0)
		}
	}
	return out, nil
}

// alibiSlopes returns the ALiBi slopes of n heads: for n a power of two the
// geometric sequence 2^(−8/n), 2^(−16/n), ..., 2^(−8); otherwise the slopes
// of the largest power of two p below n, then every other slope of 2p, as
// the paper's reference code (and BLOOM, MPT) computes them.
func alibiSlopes(n int) []float32 {
	p := 1 << int(math.Floor(math.Log2(float64(n))))
	slopes := make([]float32, 0, n)
	for i := range p {
		slopes = append(slopes, float32(math.Pow(2, -8*float64(i+1)/float64(p))))
	}
	for i := 0; len(slopes) < n; i += 2 {
		slopes = append(slopes, float32(math.Pow(2, -8*float64(i+1)/float64(2*p))))
	}
	return slopes
}

// OutputShape is (num_heads, T, T), the bias for the input's T tokens.
func (a *ALiBi) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	x, err := shapeSeqs(inputs[0])
	if err != nil {
		return nil, err
	}
	return tensor.Shape{a.NumHeads, x.T, x.T}, nil
}

// FLOPs returns 0: the bias is computed element by element.
func (a *ALiBi) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }
