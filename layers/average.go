package layers

import (
	"errors"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// Average is attention.average, the causal bag-of-words mean: output t is
// the mean of inputs 0..t. It is attention whose scores are all equal, the
// "mathematical trick" of the seeds:
// softmax(zeros(T, T).masked_fill(tril == 0, -inf), dim=-1) @ x. It computes
// the mean directly, in O(T·d), and builds those weights only for a hook.
type Average struct {
	noConfig `yaml:"-"`
}

var (
	_ registry.Layer        = (*Average)(nil)
	_ registry.OutputShaper = (*Average)(nil)
	_ registry.FLOPCounter  = (*Average)(nil)
	_ registry.Stepper      = (*Average)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "attention.average",
		Summary: "causal bag of words: token t becomes the mean of tokens ≤ t",
		New:     func() registry.Layer { return &Average{} },
	})
}

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
	out, data := in.newOutput(run, in.D)
	sc := getScratch(in.B * in.D)
	defer sc.release()
	sums := sc.floats(in.B * in.D)
	clear(sums)
	runningMeans(in, 0, sums, data, w.data)
	observe(run, weights)
	return out, nil
}

// runningMeans writes to out the running means of in's sequences, for
// Forward (past 0) and Step alike: token t of sequence b becomes the mean of
// the past tokens, whose sum sums[b·d:(b+1)·d] holds, and of tokens 0..t of
// the input; sums then holds the sum of them all. w, unless nil, receives
// the (B, 1, T, past+T) weights of the means: 1/n on each of the n tokens
// averaged.
//
// The reference multiplies the weights by every token, the later ones with
// a weight of 0, and 0·NaN and 0·Inf are NaN: a NaN or ±Inf at a later
// token of the input makes the means before it NaN in its feature, as
// there.
func runningMeans(in seqs, past int, sums, out, w []float32) {
	defer laterNonFinite(in, out)
	total := past + in.T
	for b := range in.B {
		sum := sums[b*in.D : (b+1)*in.D]
		for t := range in.T {
			row := (b*in.T + t) * in.D
			n := float32(past + t + 1)
			for j, x := range in.data[row : row+in.D] {
				sum[j] += x
				out[row+j] = sum[j] / n
			}
			if w != nil {
				weightRow := w[(b*in.T+t)*total:][:past+t+1]
				for j := range weightRow {
					weightRow[j] = 1 / n
				}
			}
		}
	}
}

// laterNonFinite sets out's row t to NaN in each feature where a token
// after t of the same sequence of in holds NaN or ±Inf.
func laterNonFinite(in seqs, out []float32) {
	nan := float32(math.NaN())
	for b := range in.B {
		for j := range in.D {
			later := false
			for t := in.T - 1; t >= 0; t-- {
				at := (b*in.T+t)*in.D + j
				if later {
					out[at] = nan
				}
				x := in.data[at]
				later = later || x-x != 0
			}
		}
	}
}

// OutputShape is the input's shape.
func (a *Average) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	return sameShape(inputs, "", 0)
}

// FLOPs returns 0: the layer computes running means, with no matrix
// product (as attention with equal scores it would count 4·B·T²·d).
func (a *Average) FLOPs([]tensor.Shape) (int64, error) { return 0, nil }

// averageState is attention.average's memory: the running sum of every
// sequence's tokens.
type averageState struct {
	session
	sums []float32 // B·d
}

// NewState starts a session with empty sums.
func (a *Average) NewState() registry.State { return &averageState{} }

// Step returns the running means at the new tokens.
func (a *Average) Step(run *registry.Run, state registry.State, inputs []*tensor.Dense) (*tensor.Dense, error) {
	in, err := singleInput(inputs)
	if err != nil {
		return nil, err
	}
	st, ok := state.(*averageState)
	switch {
	case !ok || st == nil:
		return nil, errors.New("state is not from attention.average's NewState")
	case st.seqs != 0 && (st.seqs != in.B || len(st.sums) != in.B*in.D):
		return nil, errors.New("step's batch size or width differs from the session's first step")
	}
	total := st.tokens + in.T
	weights, err := newStepWeights(run, in.B, 1, in.T, total)
	if err != nil {
		return nil, err
	}
	if st.sums == nil {
		st.sums = make([]float32, in.B*in.D)
	}
	out, data := in.newOutput(run, in.D)
	runningMeans(in, st.tokens, st.sums, data, weightData(weights))
	st.seqs, st.tokens = in.B, total
	observe(run, weights)
	return out, nil
}
