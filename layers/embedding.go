package layers

import (
	"errors"
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Embedding is nn.embedding, a lookup table of learned vectors: int64 ids,
// (T) or (B, T), become their rows, (T, d) or (B, T, d). It equals
// nn.Embedding(num_embeddings, embedding_dim, padding_idx) in eval and
// train mode alike. Models use it for token embeddings on input_ids and
// token-type embeddings on token_type_ids (BERT's two segments).
type Embedding struct {
	// NumEmbeddings is the number of rows: the vocabulary size.
	NumEmbeddings int `yaml:"num_embeddings"`
	// EmbeddingDim is the width of each row.
	EmbeddingDim int `yaml:"embedding_dim"`
	// PaddingIdx, when set, is the row a fresh model fills with zeros, as
	// PyTorch does (and whose gradient PyTorch drops). Negative values
	// count from the end, as in PyTorch.
	PaddingIdx *int `yaml:"padding_idx"`
	// Scale, when set, multiplies the looked-up rows: Gemma's embeddings
	// are scaled by √hidden_size (its normalizer), rounded to float32 as
	// Gemma rounds it.
	Scale float64 `yaml:"scale"`

	weight *tensor.Dense
	// padding is the resolved padding row, -1 without one.
	padding int
}

var (
	_ registry.Provisioner  = (*Embedding)(nil)
	_ registry.InitFinisher = (*Embedding)(nil)
	_ registry.TokenWise    = (*Embedding)(nil)
	_ registry.FLOPCounter  = (*Embedding)(nil)
	_ registry.OutputShaper = (*Embedding)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "nn.embedding",
		Summary: "token (or token-type) embedding: int64 ids to rows of a learned table (nn.Embedding)",
		New:     func() registry.Layer { return &Embedding{} },
	})
}

// Validate checks the sizes and allocates the zeroed (num_embeddings,
// embedding_dim) weight.
func (e *Embedding) Validate() error { return e.Provision(nil) }

// PlanParams lists the weight without allocating it.
func (e *Embedding) PlanParams() ([]registry.ParamShape, error) { return planParams(e.prepare) }

// Provision checks the sizes and allocates the zeroed weight from mem.
func (e *Embedding) Provision(mem registry.Memory) (err error) {
	e.weight, err = provision(mem, e.prepare)
	return err
}

func (e *Embedding) prepare(a paramAlloc) (*tensor.Dense, error) {
	if err := firstError(positive("num_embeddings", e.NumEmbeddings), positive("embedding_dim", e.EmbeddingDim)); err != nil {
		return nil, err
	}
	if math.IsNaN(e.Scale) || math.IsInf(e.Scale, 0) {
		return nil, fmt.Errorf("scale %g is not finite", e.Scale)
	}
	e.padding = -1
	if e.PaddingIdx != nil {
		p := *e.PaddingIdx
		if p < -e.NumEmbeddings || p >= e.NumEmbeddings {
			return nil, fmt.Errorf("padding_idx %d is outside [-%d, %d), the rows of num_embeddings %d",
				p, e.NumEmbeddings, e.NumEmbeddings, e.NumEmbeddings)
		}
		if p < 0 {
			p += e.NumEmbeddings
		}
		e.padding = p
	}
	return a.zeros("weight", e.NumEmbeddings, e.EmbeddingDim)
}

// Params lists the weight, initialized N(0, 1) as nn.Embedding.
func (e *Embedding) Params() []registry.Param {
	if e.weight == nil {
		return nil
	}
	return []registry.Param{{Name: "weight", Value: e.weight, Init: registry.NormalInit(0, 1)}}
}

// FinishInit zeroes the padding_idx row, as nn.Embedding's
// reset_parameters does after drawing N(0, 1).
func (e *Embedding) FinishInit() {
	if e.weight == nil || e.padding < 0 {
		return
	}
	clear(floats(e.weight)[e.padding*e.EmbeddingDim : (e.padding+1)*e.EmbeddingDim])
}

// Forward looks up every id: (T) or (B, T) int64 to (T, d) or (B, T, d).
// An id outside [0, num_embeddings) is an error, as in PyTorch.
func (e *Embedding) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if e.weight == nil {
		return nil, errNotValidated
	}
	ids, shape, err := singleIDs(inputs)
	if err != nil {
		return nil, err
	}
	out, rows, err := embeddingOutput(run, shape, e.EmbeddingDim)
	if err != nil {
		return nil, err
	}
	if err := lookupRows(rows, floats(e.weight), e.NumEmbeddings, e.EmbeddingDim, ids, 0, "num_embeddings"); err != nil || e.Scale == 0 {
		return out, err
	}
	scale := float32(e.Scale)
	for i := range rows {
		rows[i] *= scale
	}
	return out, nil
}

// TokenWise marks nn.embedding as token-wise: a token's row depends on its
// id alone.
func (e *Embedding) TokenWise() {}

// FLOPs returns 0: a lookup multiplies nothing.
func (e *Embedding) FLOPs(inputs []tensor.Shape) (int64, error) {
	return noFLOPs(e.OutputShape(inputs))
}

// OutputShape is the ids' shape with an axis of embedding_dim appended.
func (e *Embedding) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	if err := idShape(inputs[0]); err != nil {
		return nil, err
	}
	return append(inputs[0].Clone(), e.EmbeddingDim), nil
}

// singleIDs reads the one input of a layer on token ids: int64, (T) or
// (B, T), non-empty.
func singleIDs(inputs []*tensor.Dense) ([]int64, tensor.Shape, error) {
	if len(inputs) != 1 {
		return nil, nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	return readIDs("ids", inputs[0])
}

// readIDs reads an int64 tensor of ids, (T) or (B, T); name says which
// input it is.
func readIDs(name string, x *tensor.Dense) ([]int64, tensor.Shape, error) {
	if x == nil {
		return nil, nil, fmt.Errorf("%s input is nil: want int64 (T) or (B, T)", name)
	}
	if x.Dtype() != tensor.Int64 {
		return nil, nil, fmt.Errorf("%s input dtype %v: want int64 (declare the model input with dtype: int64)", name, x.Dtype())
	}
	shape := x.Shape()
	if err := idShape(shape); err != nil {
		return nil, nil, fmt.Errorf("%s input: %w", name, err)
	}
	if x.RequiresIterator() { // a view: copied (the name built only then, a pass allocates nothing)
		var err error
		if x, err = rowMajor(name+" input", x); err != nil {
			return nil, nil, err
		}
	}
	ids := x.Int64s() // not Data(): it allocates through reflect
	if len(ids) < volume(shape) {
		return nil, nil, fmt.Errorf("%s input of shape %s does not hold %d int64 values", name, fmtShape(shape), volume(shape))
	}
	return ids[:volume(shape)], shape, nil
}

// idShape checks the shape of token ids: (T) or (B, T), no empty axis.
func idShape(shape tensor.Shape) error {
	if len(shape) != 1 && len(shape) != 2 {
		return fmt.Errorf("shape %s: want ids (T) or (B, T)", fmtShape(shape))
	}
	for _, n := range shape {
		if n <= 0 {
			return fmt.Errorf("shape %s has an empty dimension", fmtShape(shape))
		}
	}
	return nil
}

// embeddingOutput is a layer's output of ids of shape (T) or (B, T): a
// tensor of that shape and d more, lent by run (registry.Outputs).
func embeddingOutput(run *registry.Run, shape tensor.Shape, d int) (*tensor.Dense, []float32, error) {
	if volume(shape) > maxElements/d {
		return nil, nil, errors.New("the embedded ids would exceed the output size limit")
	}
	lender := run.Lender()
	if len(shape) == 1 {
		out, data := lender.Float32(shape[0], d)
		return out, data, nil
	}
	out, data := lender.Float32(shape[0], shape[1], d)
	return out, data, nil
}

// lookupRows writes to dst the rows of table (rows × d) at ids plus
// offset, in order. An id outside the table is an error naming field.
func lookupRows(dst, table []float32, rows, d int, ids []int64, offset int64, field string) error {
	for i, id := range ids {
		row := id + offset
		if row < 0 || row >= int64(rows) {
			if offset != 0 {
				return fmt.Errorf("id %d at index %d plus offset %d is outside [0, %d), the rows of %s %d", id, i, offset, rows, field, rows)
			}
			return fmt.Errorf("id %d at index %d is outside [0, %d), the rows of %s %d", id, i, rows, field, rows)
		}
		copy(dst[i*d:(i+1)*d], table[row*int64(d):(row+1)*int64(d)])
	}
	return nil
}
