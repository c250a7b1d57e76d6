package cosine_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/examples/cosine"
	"github.com/attnrun/attnrun/registry"
)

// TestStepMatchesForward feeds PyTorch's input to the causal model in
// chunks of every size, through Model.NewState and Step (the KV cache of
// attention.cosine, nn.linear token-wise), and expects Forward's rows and
// attention weights: bit for bit, since each row is computed the same way.
func TestStepMatchesForward(t *testing.T) {
	m := load(t, "cosine")
	require.NoError(t, m.LoadWeights(testdata("cosine_weights.npz")))
	x := readNPY(t, "cosine_input.npy") // (2, 5, 4)
	want, wantWeights := forward(t, m, x)
	B, T := x.Shape()[0], x.Shape()[1]
	for chunk := 1; chunk <= T; chunk++ {
		t.Run(fmt.Sprintf("chunk%d", chunk), func(t *testing.T) {
			state, err := m.NewState()
			require.NoError(t, err)
			got := make([]float32, 0, want.Shape().TotalSize())
			gotWeights := make([]float32, B*T*T)
			for start := 0; start < T; start += chunk {
				n := min(chunk, T-start)
				var w *tensor.Dense
				run := &registry.Run{Hook: func(layer string, weights *tensor.Dense) { w = weights }}
				y, err := m.Step(run, state, tokens(x, start, start+n))
				require.NoError(t, err)
				require.Equal(t, []int{B, n, 2}, []int(y.Shape()))
				got = append(got, floats(y)...)
				require.Equal(t, []int{B, 1, n, start + n}, []int(w.Shape()), "weights of the new queries against every key so far")
				for b := 0; b < B; b++ {
					for i := 0; i < n; i++ {
						row := floats(w)[(b*n+i)*(start+n) : (b*n+i+1)*(start+n)]
						copy(gotWeights[(b*T+start+i)*T:], row)
					}
				}
			}
			assert.Equal(t, 5, state.Tokens())
			assert.Equal(t, floats(want), interleave(got, B, T, chunk, 2), "outputs")
			assert.Equal(t, floats(wantWeights), gotWeights, "attention weights")
		})
	}
}

// tokens copies tokens lo:hi of every sequence of a (B, T, d) tensor.
// (gorgonia's Slice drops an axis of length 1, so one token would lose
// its sequence axis.)
func tokens(x *tensor.Dense, lo, hi int) *tensor.Dense {
	B, T, d := x.Shape()[0], x.Shape()[1], x.Shape()[2]
	var data []float32
	for b := 0; b < B; b++ {
		data = append(data, floats(x)[(b*T+lo)*d:(b*T+hi)*d]...)
	}
	return tensor.New(tensor.WithShape(B, hi-lo, d), tensor.WithBacking(data))
}

// interleave reorders step outputs, chunk after chunk of (B, n, width),
// into one (B, T, width) tensor's data.
func interleave(steps []float32, B, T, chunk, width int) []float32 {
	out := make([]float32, len(steps))
	at := 0
	for start := 0; start < T; start += chunk {
		n := min(chunk, T-start)
		for b := 0; b < B; b++ {
			copy(out[(b*T+start)*width:(b*T+start+n)*width], steps[at:at+n*width])
			at += n * width
		}
	}
	return out
}

// TestStepErrors checks what Step refuses; a refused step leaves the
// state as it was.
func TestStepErrors(t *testing.T) {
	layer := &cosine.Cosine{DIn: 4, DOut: 3, Scale: 10, Causal: true}
	require.NoError(t, layer.Validate())
	state := layer.NewState()
	_, err := layer.Step(&registry.Run{}, state, []*tensor.Dense{randomInput(2, 3, 4)})
	require.NoError(t, err)

	tests := []struct {
		name   string
		layer  *cosine.Cosine
		state  registry.State
		inputs []*tensor.Dense
		want   string
	}{
		{"not causal", &cosine.Cosine{DIn: 4, DOut: 3, Scale: 10}, nil, []*tensor.Dense{randomInput(2, 1, 4)},
			"cannot run incrementally: without causal"},
		{"batch", layer, state, []*tensor.Dense{randomInput(3, 1, 4)}, "input has 3 sequences; the session started with 2"},
		{"width", layer, state, []*tensor.Dense{randomInput(2, 1, 5)}, "d_in mismatch"},
		{"inputs", layer, state, nil, "takes 1 input, got 0"},
		{"foreign state", layer, foreignState{}, []*tensor.Dense{randomInput(2, 1, 4)}, "does not come from attention.cosine's NewState"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.layer.Params() == nil {
				require.NoError(t, tt.layer.Validate())
			}
			if tt.state == nil {
				tt.state = tt.layer.NewState()
			}
			_, err := tt.layer.Step(&registry.Run{}, tt.state, tt.inputs)
			require.ErrorContains(t, err, tt.want)
		})
	}
	assert.Equal(t, 3, state.Tokens(), "refused steps leave the state as it was")
}

// foreignState is a State that no cosine layer made.
type foreignState struct{}

func (foreignState) Tokens() int { return 0 }

// TestFLOPs checks the count for a batch: projections 2·B·T·d_in·3·d_out
// and attention 4·B·T²·d_out.
func TestFLOPs(t *testing.T) {
	layer := &cosine.Cosine{DIn: 4, DOut: 3, Scale: 10}
	got, err := layer.FLOPs([]tensor.Shape{{2, 5, 4}})
	require.NoError(t, err)
	assert.Equal(t, int64(2*2*5*4*3*3+4*2*5*5*3), got)
	unbatched, err := layer.FLOPs([]tensor.Shape{{5, 4}})
	require.NoError(t, err)
	assert.Equal(t, got/2, unbatched)

	_, err = layer.FLOPs([]tensor.Shape{{2, 5, 3}})
	assert.ErrorContains(t, err, "d_in mismatch")
	_, err = layer.FLOPs([]tensor.Shape{{1 << 40, 1 << 20, 4}})
	assert.ErrorContains(t, err, "overflows an int64")
}
