package torchrand

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// round4 rounds to the 4 decimals PyTorch prints.
func round4(v float32) float64 { return math.Round(float64(v)*1e4) / 1e4 }

func round4All(vs []float32) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = round4(v)
	}
	return out
}

// TestNotebook003RandnWeights replays notebook 003: manual_seed(1), then
// W_q, W_k, W_v = randn(3, 2) three times, as printed there.
func TestNotebook003RandnWeights(t *testing.T) {
	g := New(1)
	want := [][]float64{
		{0.6614, 0.2669, 0.0617, 0.6213, -0.4519, -0.1661},    // W_q
		{-1.5228, 0.3817, -1.0276, -0.5631, -0.8923, -0.0583}, // W_k
		{-0.1955, -0.9656, 0.4224, 0.2673, -0.4212, -0.5107},  // W_v
	}
	for i, w := range want {
		got := make([]float32, 6)
		require.NoError(t, g.Normal(got, 0, 1))
		assert.Equal(t, w, round4All(got), "matrix %d", i)
	}
}

// TestNotebook000RandWeights replays notebook 000: manual_seed(123), W_query,
// W_key, W_value = rand(3, 2); the notebook prints x_2 @ W_query.
func TestNotebook000RandWeights(t *testing.T) {
	g := New(123)
	wq := make([]float32, 6)
	require.NoError(t, g.Uniform(wq, 0, 1))
	x2 := []float32{0.55, 0.87, 0.66} // "journey"
	var q [2]float32
	for j := range q {
		for k := range x2 {
			q[j] += x2[k] * wq[k*2+j]
		}
	}
	assert.Equal(t, []float64{0.4306, 1.4551}, round4All(q[:]))
}

// TestNotebook002RandInt replays notebook 002: manual_seed(42), then
// randint(0, 10, (3, 2)).
func TestNotebook002RandInt(t *testing.T) {
	got := make([]int64, 6)
	require.NoError(t, New(42).RandInt(got, 0, 10))
	assert.Equal(t, []int64{2, 7, 6, 4, 6, 5}, got)
}

// TestMT19937KnownAnswer checks the engine against the C++ standard's
// required value: the 10000th output of a default-seeded std::mt19937.
func TestMT19937KnownAnswer(t *testing.T) {
	g := New(5489)
	var v uint32
	for range 10000 {
		v = g.Uint32()
	}
	assert.Equal(t, uint32(4123659995), v)
}

func TestUint64TakesFirstDrawAsHighHalf(t *testing.T) {
	a, b := New(3), New(3)
	hi, lo := a.Uint32(), a.Uint32()
	assert.Equal(t, uint64(hi)<<32|uint64(lo), b.Uint64())
}

func TestSeedResetsStreamAndSpareNormal(t *testing.T) {
	fresh := make([]float32, 3)
	require.NoError(t, New(9).Normal(fresh, 0, 1))

	g := New(9)
	odd := make([]float32, 1) // leaves a spare normal behind
	require.NoError(t, g.Normal(odd, 0, 1))
	g.Seed(9)
	again := make([]float32, 3)
	require.NoError(t, g.Normal(again, 0, 1))

	assert.Equal(t, fresh, again)
}

func TestSeedUsesLow32Bits(t *testing.T) {
	assert.Equal(t, New(7).Uint64(), New(1<<32+7).Uint64())
}

func TestInvalidArguments(t *testing.T) {
	g := New(0)
	dst := make([]float32, 4)
	for _, c := range []struct {
		name     string
		from, to float64
		want     string
	}{
		{"reversed", 1, 0, "from <= to"},
		{"nan", math.NaN(), 1, "from=NaN is not a finite float32"},
		{"inf", 0, math.Inf(1), "to=+Inf is not a finite float32"},
		{"beyond float32", -1e39, 0, "from=-1e+39 is not a finite float32"},
		{"too wide", -math.MaxFloat32, math.MaxFloat32, "wider than the largest float32"},
	} {
		t.Run("uniform "+c.name, func(t *testing.T) {
			err := g.Uniform(dst, c.from, c.to)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	for _, std := range []float64{-1, math.NaN()} {
		err := g.Normal(dst, 0, std)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "std >= 0.0")
	}
	err := g.RandInt(make([]int64, 2), 5, 5)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "low < high")

	// A rejected call consumes nothing from the stream.
	assert.Equal(t, New(0).Uint32(), g.Uint32())
}

func TestKernelString(t *testing.T) {
	assert.Equal(t, "avx2", AVX2.String())
	assert.Equal(t, "default", NoAVX2.String())
	assert.Equal(t, "Kernel(7)", Kernel(7).String())
	assert.Panics(t, func() { NewKernel(0, Kernel(7)) })
}

// TestFMA32MatchesExactRounding checks fma32 against a*b+c computed exactly
// and rounded once to float32, on random operands and on operands built so
// that the float64 sum lands on a float32 halfway point (where rounding
// twice goes wrong).
func TestFMA32MatchesExactRounding(t *testing.T) {
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(400) // enough to hold a*b+c exactly
		x.Mul(big.NewFloat(float64(a)).SetPrec(400), big.NewFloat(float64(b)).SetPrec(400))
		x.Add(x, big.NewFloat(float64(c)).SetPrec(400))
		f, _ := x.Float32()
		return f
	}
	r := rand.New(rand.NewPCG(1, 2))
	randFloat := func() float32 {
		return float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(40)-20)))
	}
	for i := range 200000 {
		a, b, c := randFloat(), randFloat(), randFloat()
		if i%2 == 0 {
			c = -mul32(a, b) // cancellation
		}
		require.Equal(t, exact(a, b, c), fma32(a, b, c), "fma32(%v, %v, %v)", a, b, c)
	}
	// a*b = 2^-24 + 2^-60, so a*b+1 lies just above the float32 halfway
	// point 1 + 2^-24: the float64 sum rounds onto the halfway point and a
	// second rounding goes to even (1), but the right answer is 1 + 2^-23.
	a := float32(0x1p-24 * (1 + 0x1p-12))
	b := float32(1 - 0x1p-12 + 0x1p-24)
	assert.Equal(t, float32(1), float32(math.FMA(float64(a), float64(b), 1)), "rounding twice")
	assert.Equal(t, float32(1+0x1p-23), fma32(a, b, 1))
	assert.Equal(t, float32(1), fma32(-a, b, 1+0x1p-23), "the mirror case")
}
