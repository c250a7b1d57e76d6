package layers

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

func init() {
	registry.Register(registry.Info{
		ID:      "position.padded",
		Summary: "RoBERTa's learned positions, numbered from the token ids past the padding (create_position_ids_from_input_ids)",
		New:     func() registry.Layer { return &PaddedPosition{} },
	})
}

// PaddedPosition is position.padded, RoBERTa's position embedding: an
// nn.Embedding(num_embeddings, embedding_dim, padding_idx) looked up at
// positions computed from the token ids as Hugging Face's
// create_position_ids_from_input_ids computes them. A padding token (id
// padding_idx) gets position padding_idx; the k-th other token of its
// sequence (counting from 1) gets padding_idx + k. Int64 ids (T) or
// (B, T) in, (T, d) or (B, T, d) out.
//
// A token's position depends on the tokens before it, so the layer is not
// token-wise: it does not run incrementally.
type PaddedPosition struct {
	// NumEmbeddings is the number of rows (max_position_embeddings).
	NumEmbeddings int `yaml:"num_embeddings"`
	// EmbeddingDim is the width of each row.
	EmbeddingDim int `yaml:"embedding_dim"`
	// PaddingIdx is the padding token's id, which is also its position
	// (RoBERTa: 1).
	PaddingIdx int `yaml:"padding_idx"`

	weight *tensor.Dense
}

var (
	_ registry.Provisioner  = (*PaddedPosition)(nil)
	_ registry.FLOPCounter  = (*PaddedPosition)(nil)
	_ registry.OutputShaper = (*PaddedPosition)(nil)
)

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
	positions := paddedPositions(ids, shape[len(shape)-1], int64(p.PaddingIdx))
	return lookupRows(floats(p.weight), p.NumEmbeddings, p.EmbeddingDim, positions, 0, shape, "num_embeddings")
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
