package layers

import (
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

func init() {
	registry.Register(registry.Info{
		ID:      "attention.average",
		Summary: "causal bag of words: token t becomes the mean of tokens ≤ t",
		New:     func() registry.Layer { return &Average{} },
	})
}

// Average is attention.average, the causal bag-of-words mean: output t is
// the mean of inputs 0..t. It is attention whose scores are all equal, the
// "mathematical trick" of the seeds:
// softmax(zeros(T, T).masked_fill(tril == 0, -inf), dim=-1) @ x. It computes
// the mean directly, in O(T·d), and builds those weights only for a hook.
type Average struct{}

var _ registry.Layer = (*Average)(nil)

// Validate accepts the layer: it has no configuration.
func (a *Average) Validate() error { return nil }

// Params returns nil: the layer has no parameters.
func (a *Average) Params() []registry.Param { return nil }

// Forward returns the running means, shaped like the input.
func (a *Average) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := singleInput(inputs)
	if err != nil {
		return nil, err
	}
	weights, w, err := newWeights(run, in, 1)
	if err != nil {
		return nil, err
	}
	out, data := in.newOutput(in.D)
	sc := getScratch(in.D)
	defer sc.release()
	sum := sc.floats(in.D)
	for b := 0; b < in.B; b++ {
		clear(sum)
		for t := 0; t < in.T; t++ {
			row := (b*in.T + t) * in.D
			n := float32(t + 1)
			for j, x := range in.data[row : row+in.D] {
				sum[j] += x
				data[row+j] = sum[j] / n
			}
			if w.data != nil {
				weightRow := w.data[(b*in.T+t)*in.T:][:t+1]
				for j := range weightRow {
					weightRow[j] = 1 / n
				}
			}
		}
	}
	observe(run, weights)
	return out, nil
}
