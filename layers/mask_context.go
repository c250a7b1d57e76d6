package layers

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// ContextMask is mask.context: it reads a keep mask over the positions of
// a whole context, float32 or int64 (B, heads, rows, columns) of 1s
// (attend) and 0s (hide), heads 1 for a mask all heads share, as
// Megatron's GPT-2 takes it (a (B, 1, Lmax, Lmax) causal attention_mask),
// and cuts the block the attention of the tokens reads: the rows of the
// tokens' positions and the columns of every key so far. Its inputs are
// the tokens, (T, d) or (B, T, d), whose number it reads, then the mask.
// Forward is the first T rows and columns; a decoding step of n tokens
// after p is rows p..p+n and columns 0..p+n, which is what the graph
// computes when it slices the mask at the length of its KV cache. The
// output is float32 (B, heads, T, keys), 1 where the mask is not 0, for
// attention.sdpa with mask: bool and mask_polarity: keep.
type ContextMask struct {
	noConfig `yaml:"-"`
}

var (
	_ registry.FLOPCounter  = (*ContextMask)(nil)
	_ registry.OutputShaper = (*ContextMask)(nil)
	_ registry.Resumer      = (*ContextMask)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "mask.context",
		Summary: "a keep mask over the whole context, (B, 1, rows, columns), cut to the block of the tokens' queries and the keys so far",
		New:     func() registry.Layer { return &ContextMask{} },
	})
}

// Forward cuts the block of the first T rows and columns.
func (c *ContextMask) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	return contextBlock(inputs, 0)
}

// NewState starts a decoding session at position 0.
func (c *ContextMask) NewState() registry.State { return &positionState{} }

// Step cuts the block of the new tokens' rows, at the session's position,
// and the columns of every key so far, and advances the session.
func (c *ContextMask) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if len(inputs) != 2 || inputs[0] == nil {
		return nil, fmt.Errorf("takes 2 inputs, the tokens and the mask, got %d", len(inputs))
	}
	b, t, err := contextTokens(inputs[0].Shape())
	if err != nil {
		return nil, err
	}
	s, err := stateOf[positionState](state, b)
	if err != nil {
		return nil, err
	}
	out, err := contextBlock(inputs, s.tokens)
	if err != nil {
		return nil, err
	}
	s.advance(b, t)
	return out, nil
}

// Resume starts a session after tokens tokens (see registry.Resumer).
func (c *ContextMask) Resume(state registry.State, seqs, tokens int, keys, values *tensor.Dense) error {
	return resumePosition(state, seqs, tokens, keys, values)
}

// Cache returns nothing: the layer keeps no keys.
func (c *ContextMask) Cache(registry.State) (keys, values *tensor.Dense, err error) {
	return nil, nil, nil
}

// FLOPs returns 0: the layer compares and copies.
func (c *ContextMask) FLOPs(inputs []tensor.Shape) (int64, error) {
	return noFLOPs(c.OutputShape(inputs))
}

// OutputShape is (B, heads, T, T) for T tokens and a (B, heads, rows,
// columns) mask.
func (c *ContextMask) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) != 2 {
		return nil, fmt.Errorf("takes 2 inputs, the tokens and the mask, got %d", len(inputs))
	}
	b, t, err := contextTokens(inputs[0])
	if err != nil {
		return nil, err
	}
	if err := checkContextMask(inputs[1], b, t); err != nil {
		return nil, err
	}
	m := inputs[1]
	return tensor.Shape{m[0], m[1], t, t}, nil
}

// contextTokens reads the number of sequences and tokens of (T, d) or
// (B, T, d) tokens.
func contextTokens(s tensor.Shape) (b, t int, err error) {
	switch {
	case len(s) == 2 && s[0] > 0:
		return 1, s[0], nil
	case len(s) == 3 && s[0] > 0 && s[1] > 0:
		return s[0], s[1], nil
	}
	return 0, 0, fmt.Errorf("tokens shape %s: want (T, d) or (B, T, d)", fmtShape(s))
}

// checkContextMask checks a mask over a context of at least keys
// positions for b sequences.
func checkContextMask(m tensor.Shape, b, keys int) error {
	if len(m) != 4 || m[0] != 1 && m[0] != b || m[1] < 1 {
		return fmt.Errorf("mask shape %s: want (B, heads, rows, columns) for %d sequence(s)", fmtShape(m), b)
	}
	if m[2] < keys || m[3] < keys {
		return fmt.Errorf("mask shape %s covers %d×%d positions, the tokens so far are %d", fmtShape(m), m[2], m[3], keys)
	}
	return nil
}

// contextBlock cuts rows past..past+T and columns 0..past+T of the mask
// inputs[1] (float32 or int64) for the T tokens inputs[0], as 1 where it
// is not 0.
func contextBlock(inputs []*tensor.Dense, past int) (*tensor.Dense, error) {
	if len(inputs) != 2 || inputs[0] == nil || inputs[1] == nil {
		return nil, fmt.Errorf("takes 2 inputs, the tokens and the mask, got %d", len(inputs))
	}
	b, t, err := contextTokens(inputs[0].Shape())
	if err != nil {
		return nil, err
	}
	shape := []int(inputs[1].Shape().Clone())
	if err := checkContextMask(shape, b, past+t); err != nil {
		return nil, err
	}
	mask, err := rowMajor("mask", inputs[1])
	if err != nil {
		return nil, err
	}
	var keep []float32
	switch data := mask.Data().(type) {
	case []float32:
		keep, err = cutBlock(data, shape, past, t)
	case []int64:
		keep, err = cutBlock(data, shape, past, t)
	default:
		return nil, fmt.Errorf("mask dtype %v: want float32 or int64", mask.Dtype())
	}
	if err != nil {
		return nil, err
	}
	return tensor.New(tensor.WithShape(shape[0], shape[1], t, past+t), tensor.WithBacking(keep)), nil
}

// cutBlock copies rows past..past+t and columns 0..past+t of each (rows,
// columns) plane of a mask of the given shape as 1 where it is not 0.
func cutBlock[T float32 | int64](data []T, shape []int, past, t int) ([]float32, error) {
	if len(data) < volume(shape) {
		return nil, fmt.Errorf("mask shape %s: backing array too short", fmtShape(shape))
	}
	planes, rows, cols, keys := shape[0]*shape[1], shape[2], shape[3], past+t
	keep := make([]float32, planes*t*keys)
	for p := range planes {
		for q := range t {
			row := data[(p*rows+past+q)*cols:][:keys]
			out := keep[(p*t+q)*keys:][:keys]
			for k, x := range row {
				if x != 0 {
					out[k] = 1
				}
			}
		}
	}
	return keep, nil
}
