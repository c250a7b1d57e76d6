package cosine

import (
	"errors"
	"fmt"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/attnmath"
	"github.com/attnrun/attnrun/registry"
)

// The interface guard: a model whose layers are all Steppers or TokenWise
// runs incrementally (models.Model.NewState and Step).
var _ registry.Stepper = (*Cosine)(nil)

// kvCache is what a causal cosine layer remembers between the steps of one
// decoding session: for each sequence, the normalized keys and the values
// of every token so far, tokens × d_out, row-major.
type kvCache struct {
	batch        int // sequences, fixed by the first step; 0 before it
	tokens       int
	keys, values [][]float32
}

// Tokens reports how many tokens of each sequence the layer has seen.
func (s *kvCache) Tokens() int { return s.tokens }

// NewState returns the empty cache of a new decoding session.
func (c *Cosine) NewState() registry.State { return &kvCache{} }

// errNotCausal is Step's error for a layer without causal: each token
// attends to the tokens after it, so a new token changes every output
// before it, and there is nothing to compute incrementally.
var errNotCausal = errors.New("cannot run incrementally: without causal, every earlier output changes when a token arrives")

// Step attends the new tokens of each sequence ((n, d_in) or (B, n, d_in))
// to every token so far, themselves included, and returns their n output
// rows; the cache keeps their keys and values for the next step. Row for
// row, any split of a sequence gives what Forward gives for the whole of
// it. The attention weights it reports are (B, 1, n, tokens so far).
// On error the state is left as it was.
func (c *Cosine) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if c.query == nil {
		return nil, errNotValidated
	}
	if !c.Causal {
		return nil, errNotCausal
	}
	cache, ok := state.(*kvCache)
	if !ok || cache == nil {
		return nil, fmt.Errorf("state %T does not come from attention.cosine's NewState", state)
	}
	if len(inputs) != 1 {
		return nil, fmt.Errorf("takes 1 input, got %d", len(inputs))
	}
	dOut := c.query.out
	x, err := readTokens(inputs[0], c.query.in)
	if err != nil {
		return nil, err
	}
	if cache.batch != 0 && x.B != cache.batch {
		return nil, fmt.Errorf("input has %d sequences; the session started with %d", x.B, cache.batch)
	}
	rows, keys := x.B*x.T, cache.tokens+x.T
	if err := checkSize("cached keys and values", x.B*keys, dOut); err != nil {
		return nil, err
	}
	var weights []float32
	if run.WantWeights() {
		if err := checkSize("attention weights", rows, keys); err != nil {
			return nil, err
		}
		weights = make([]float32, rows*keys)
	}

	q, k, v, err := c.project(x.data, rows)
	if err != nil {
		return nil, err
	}
	// The grown caches are kept aside until every sequence has attended,
	// so that an error leaves the state as it was.
	grownKeys, grownValues := make([][]float32, x.B), make([][]float32, x.B)
	out := make([]float32, rows*dOut)
	step := x.T * dOut // the new rows of one sequence
	for b := 0; b < x.B; b++ {
		var pastKeys, pastValues []float32
		if cache.batch != 0 {
			pastKeys, pastValues = cache.keys[b], cache.values[b]
		}
		grownKeys[b] = append(pastKeys, k[b*step:(b+1)*step]...)
		grownValues[b] = append(pastValues, v[b*step:(b+1)*step]...)
		var w []float32
		if weights != nil {
			w = weights[b*x.T*keys : (b+1)*x.T*keys]
		}
		a := c.attention(1, x.T, keys, true, w)
		if err := attnmath.Attend(out[b*step:(b+1)*step], q[b*step:(b+1)*step], grownKeys[b], grownValues[b], a); err != nil {
			return nil, err
		}
	}
	cache.batch, cache.tokens = x.B, keys
	cache.keys, cache.values = grownKeys, grownValues
	if weights != nil {
		run.Observe(tensor.New(tensor.WithShape(x.B, 1, x.T, keys), tensor.WithBacking(weights)))
	}
	return tensor.New(tensor.WithShape(x.shape(dOut)...), tensor.WithBacking(out)), nil
}
