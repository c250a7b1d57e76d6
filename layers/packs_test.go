package layers

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// TestPackedWeightsBudget checks that a linear layer packs its weight on
// the first product of packMinRows rows or more, not before, counts the
// copy against its budget, gives the same bits as kernels.Gemm on the
// unpacked weight, runs unpacked when the budget has no room for the copy,
// and gives the bytes back on ParamsChanged.
func TestPackedWeightsBudget(t *testing.T) {
	const in, out = 48, 40
	l := &Linear{DIn: in, DOut: out, Bias: true}
	mem := budget.New(1 << 20)
	require.NoError(t, l.Provision(mem))
	base := mem.Used() // the parameters, as ReserveParams counts them
	rng := rand.New(rand.NewPCG(3, 4))
	for _, p := range l.Params() {
		for i, data := 0, floats(p.Value); i < len(data); i++ {
			data[i] = rng.Float32()*2 - 1
		}
	}
	var _ registry.ParamsWatcher = l

	for _, rows := range []int{1, packMinRows - 1} {
		run(t, l, rng, rows, in, out)
		require.Equal(t, base, mem.Used(), "%d rows: no packed copy", rows)
	}
	run(t, l, rng, 16, in, out)
	require.Equal(t, base+budget.Bytes(in*out, 4), mem.Used(), "the packed copy is in the budget")
	require.NotNil(t, l.weights.packed.Load())
	l.ParamsChanged()
	require.Equal(t, base, mem.Used(), "ParamsChanged gives the copy back")
	require.Nil(t, l.weights.packed.Load())

	tight := &Linear{DIn: in, DOut: out, Bias: true}
	require.NoError(t, tight.Provision(budget.New(base)))
	copy(floats(tight.weights.weight), floats(l.weights.weight))
	copy(floats(tight.weights.bias), floats(l.weights.bias))
	run(t, tight, rng, 16, in, out)
	require.Nil(t, tight.weights.packed.Load(), "no room in the budget: unpacked")
}

// run applies l to rows random rows and checks the result, bit for bit,
// against kernels.Linear on l's weights.
func run(t *testing.T, l *Linear, rng *rand.Rand, rows, in, out int) {
	t.Helper()
	x := randomDense(rng, rows, in)
	got, err := l.Forward(nil, []*tensor.Dense{x})
	require.NoError(t, err)
	want := make([]float32, rows*out)
	kernels.Linear(want, floats(x), floats(l.weights.weight), floats(l.weights.bias), rows, in, out)
	require.Equal(t, want, floats(got), "%d rows", rows)
}

// TestPackedLayersWatchParams checks that every layer that keeps packed
// copies of its weights (packedWeights) tells the model so, through
// ParamsChanged: a layer without it would run on stale copies after
// LoadStateDict.
func TestPackedLayersWatchParams(t *testing.T) {
	for _, l := range []registry.Layer{&Causal{}, &Linear{}, &MLP{}, &MultiHead{}, &SDPA{}, &Self{}, &TorchMHA{}} {
		_, ok := l.(registry.ParamsWatcher)
		require.True(t, ok, "%T", l)
	}
}
