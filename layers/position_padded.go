package layers

import (
	"errors"
	"fmt"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// PaddedPosition is position.padded, RoBERTa's position embedding: an
// nn.Embedding(num_embeddings, embedding_dim, padding_idx) looked up at
// positions computed from the token ids as Hugging Face's
// create_position_ids_from_input_ids computes them. A padding token (id
// padding_idx) gets position padding_idx; the k-th other token of its
// sequence (counting from 1) gets padding_idx + k. Int64 ids (T) or
// (B, T) in, (T, d) or (B, T, d) out.
//
// With input: attention_mask, the layer reads the (B, T) attention_mask
// (1 for a token, 0 for padding) instead of the ids, as OPT's learned
// positions do: (cumsum(mask)·mask − 1) + offset, which is padding_idx
// for padding and padding_idx + k for the k-th token with padding_idx =
// offset − 1 (OPT: 1). A token's position then depends on the mask
// before it, which a decoding step passes whole (past and new tokens):
// such a layer runs incrementally, returning the new tokens' rows.
// Numbered from the ids, a token's position depends on the ids before it,
// which a step does not see: that layer does not run incrementally.
type PaddedPosition struct {
	// NumEmbeddings is the number of rows (max_position_embeddings).
	NumEmbeddings int `yaml:"num_embeddings"`
	// EmbeddingDim is the width of each row.
	EmbeddingDim int `yaml:"embedding_dim"`
	// PaddingIdx is the padding token's id, which is also its position
	// (RoBERTa: 1).
	PaddingIdx int `yaml:"padding_idx"`
	// Input is what the positions are numbered from: "ids" (default, the
	// token ids, padding where they equal padding_idx) or
	// "attention_mask" (padding where it is 0).
	Input string `yaml:"input"`

	weight *tensor.Dense
}

var (
	_ registry.Provisioner  = (*PaddedPosition)(nil)
	_ registry.FLOPCounter  = (*PaddedPosition)(nil)
	_ registry.OutputShaper = (*PaddedPosition)(nil)
	_ registry.Resumer      = (*PaddedPosition)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "position.padded",
		Summary: "RoBERTa's learned positions, numbered from the token ids past the padding (create_position_ids_from_input_ids)",
		New:     func() registry.Layer { return &PaddedPosition{} },
	})
}

// Validate checks the sizes and allocates the zeroed weight.
func (p *PaddedPosition) Validate() error { return p.Provision(nil) }

// PlanParams lists the weight without allocating it.
func (p *PaddedPosition) PlanParams() ([]registry.ParamShape, error) { return planParams(p.prepare) }

// Provision checks the sizes and allocates the zeroed weight from mem.
func (p *PaddedPosition) Provision(mem registry.Memory) (err error) {
	p.weight, err = provision(mem, p.prepare)
	return err
}

func (p *PaddedPosition) prepare(a paramAlloc) (*tensor.Dense, error) {
	if err := firstError(positive("num_embeddings", p.NumEmbeddings), positive("embedding_dim", p.EmbeddingDim)); err != nil {
		return nil, err
	}
	if p.Input != "" && p.Input != "ids" && p.Input != "attention_mask" {
		return nil, fmt.Errorf("input %q is not \"ids\" or \"attention_mask\"", p.Input)
	}
	if p.PaddingIdx < 0 || p.PaddingIdx >= p.NumEmbeddings {
		return nil, fmt.Errorf("padding_idx %d is outside [0, %d), the rows of num_embeddings %d", p.PaddingIdx, p.NumEmbeddings, p.NumEmbeddings)
	}
	return a.zeros("weight", p.NumEmbeddings, p.EmbeddingDim)
}

// Params lists the weight, initialized N(0, 1) as nn.Embedding.
func (p *PaddedPosition) Params() []registry.Param {
	if p.weight == nil {
		return nil
	}
	return []registry.Param{{Name: "weight", Value: p.weight, Init: registry.NormalInit(0, 1)}}
}

// Forward numbers the tokens of each sequence and looks up their rows. A
// position outside [0, num_embeddings) is an error, as in PyTorch.
func (p *PaddedPosition) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if p.weight == nil {
		return nil, errNotValidated
	}
	ids, shape, err := singleIDs(inputs)
	if err != nil {
		return nil, err
	}
	positions := p.positions(ids, shape[len(shape)-1])
	out, rows, err := embeddingOutput(run, shape, p.EmbeddingDim)
	if err != nil {
		return nil, err
	}
	return out, lookupRows(rows, floats(p.weight), p.NumEmbeddings, p.EmbeddingDim, positions, 0, "num_embeddings")
}

// fromMask reports input: attention_mask.
func (p *PaddedPosition) fromMask() bool { return p.Input == "attention_mask" }

// positions numbers the tokens of each sequence of t ids or mask values.
func (p *PaddedPosition) positions(in []int64, t int) []int64 {
	if !p.fromMask() {
		return paddedPositions(in, t, int64(p.PaddingIdx))
	}
	ids := make([]int64, len(in)) // padding where the mask is 0, a token elsewhere
	for i, m := range in {
		if m == 0 {
			ids[i] = int64(p.PaddingIdx)
		} else {
			ids[i] = int64(p.PaddingIdx) + 1
		}
	}
	return paddedPositions(ids, t, int64(p.PaddingIdx))
}

// NewState starts a decoding session.
func (p *PaddedPosition) NewState() registry.State { return &positionState{} }

// Step numbers the tokens from the attention_mask of the session's tokens
// and the new ones, (B, Tokens()+n), and returns the n new tokens' rows,
// (B, n, d). Numbered from the ids, the layer cannot step.
func (p *PaddedPosition) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if p.weight == nil {
		return nil, errNotValidated
	}
	if !p.fromMask() {
		return nil, errors.New("positions numbered from the ids depend on the ids of earlier steps: position.padded steps with input: attention_mask only")
	}
	mask, shape, err := singleIDs(inputs)
	if err != nil {
		return nil, err
	}
	if len(shape) != 2 {
		return nil, fmt.Errorf("attention_mask shape %s: a step takes (B, tokens so far + new)", fmtShape(shape))
	}
	s, err := stateOf[positionState](state, shape[0])
	if err != nil {
		return nil, err
	}
	B, total := shape[0], shape[1]
	n := total - s.tokens
	if n <= 0 {
		return nil, fmt.Errorf("attention_mask covers %d token(s), the session has seen %d: no new ones", total, s.tokens)
	}
	all := p.positions(mask, total)
	positions := make([]int64, 0, B*n)
	for b := range B {
		positions = append(positions, all[b*total+s.tokens:(b+1)*total]...)
	}
	out, rows, err := embeddingOutput(run, tensor.Shape{B, n}, p.EmbeddingDim)
	if err != nil {
		return nil, err
	}
	if err := lookupRows(rows, floats(p.weight), p.NumEmbeddings, p.EmbeddingDim, positions, 0, "num_embeddings"); err != nil {
		return nil, err
	}
	s.advance(B, n)
	return out, nil
}

// Resume starts a session after tokens tokens (see registry.Resumer).
func (p *PaddedPosition) Resume(state registry.State, seqs, tokens int, keys, values *tensor.Dense) error {
	return resumePosition(state, seqs, tokens, keys, values)
}

// Cache returns nothing: a position layer keeps no keys.
func (p *PaddedPosition) Cache(registry.State) (keys, values *tensor.Dense, err error) {
	return nil, nil, nil
}

// paddedPositions numbers the tokens of each sequence of t ids as
// create_position_ids_from_input_ids does: pad for a padding token, pad + k
// for the k-th other one.
func paddedPositions(ids []int64, t int, pad int64) []int64 {
	out := make([]int64, len(ids))
	for s := 0; s < len(ids); s += t {
		k := int64(0)
		for i, id := range ids[s : s+t] {
			out[s+i] = pad
			if id != pad {
				k++
				out[s+i] += k
			}
		}
	}
	return out
}

// FLOPs returns 0: a lookup multiplies nothing.
func (p *PaddedPosition) FLOPs(inputs []tensor.Shape) (int64, error) {
	return noFLOPs(p.OutputShape(inputs))
}

// OutputShape is the ids' shape with an axis of embedding_dim appended.
func (p *PaddedPosition) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	if err := idShape(inputs[0]); err != nil {
		return nil, err
	}
	return append(inputs[0].Clone(), p.EmbeddingDim), nil
}
