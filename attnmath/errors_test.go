package attnmath

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Sizes the slices cannot hold are errors naming the function and the
// operand, never panics, and nothing is written.
func TestErrors(t *testing.T) {
	six := make([]float32, 6)
	ok := Attention{Batch: 1, Heads: 1, Queries: 2, Keys: 3, HeadDim: 2}
	for _, c := range []struct {
		name string
		call func() error
		want string
	}{
		{"short x", func() error { return Linear(six, six[:5], six, nil, 2, 3, 2) },
			"attnmath.Linear: x holds 5 floats, rows×in = 2×3 needs 6"},
		{"short w", func() error { return Linear(six, six, six[:1], nil, 2, 3, 2) },
			"attnmath.Linear: w holds 1 floats, out×in = 2×3 needs 6"},
		{"short y", func() error { return Linear(six[:3], six, six, nil, 2, 3, 2) },
			"attnmath.Linear: y holds 3 floats, rows×out = 2×2 needs 4"},
		{"short bias", func() error { return Linear(six, six, six, six[:1], 2, 3, 2) },
			"attnmath.Linear: b holds 1 floats, out = 2 needs 2"},
		{"negative rows", func() error { return Linear(six, six, six, nil, -1, 3, 2) },
			"attnmath.Linear: x of rows×in = -1×3 is negative or overflows"},
		{"overflow", func() error { return Softmax(six, math.MaxInt/2, 3) },
			"attnmath.Softmax: x of rows×n = 4611686018427387903×3 is negative or overflows"},
		{"short softmax", func() error { return Softmax(six, 2, 4) },
			"attnmath.Softmax: x holds 6 floats, rows×n = 2×4 needs 8"},
		{"short k", func() error { return Attend(six, six, six[:5], six, ok) },
			"attnmath.Attend: k holds 5 floats, Batch×Keys×(KVHeads·HeadDim) = 1×3×2 needs 6"},
		{"short weights", func() error {
			a := ok
			a.Weights = six[:5]
			return Attend(six, six, six, six, a)
		}, "attnmath.Attend: Weights holds 5 floats, Batch×Heads×Queries×Keys = 1×1×2×3 needs 6"},
		{"groups", func() error {
			a := ok
			a.Heads, a.KVHeads = 3, 2
			return Attend(six, six, six, six, a)
		}, "attnmath.Attend: KVHeads 2 does not divide Heads 3"},
		{"negative", func() error {
			a := ok
			a.Keys = -1
			return Attend(six, six, six, six, a)
		}, "attnmath.Attend: Keys is -1, must not be negative"},
		{"mask", func() error {
			a := ok
			a.Mask = six[:5]
			return Attend(six, six, six, six, a)
		}, "attnmath.Attend: Mask holds 5 floats, want Queries×Keys = 6 or Batch×Queries×Keys = 6"},
		{"NaN scale", func() error {
			a := ok
			a.Scale = float32(math.NaN())
			return Attend(six, six, six, six, a)
		}, "attnmath.Attend: Scale is NaN"},
		{"overflowing sizes", func() error {
			a := ok
			a.Queries, a.Keys = math.MaxInt/4, 8
			return Attend(six, six, six, six, a)
		}, "attnmath.Attend: the sizes 2305843009213693951×8 overflow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.EqualError(t, c.call(), c.want)
		})
	}
	assert.Equal(t, make([]float32, 6), six, "a failed call wrote")
}

// Empty sizes are not errors: nothing to compute, or the PyTorch result
// of an empty sum.
func TestEmptySizes(t *testing.T) {
	y := []float32{9, 9, 9, 9}
	require.NoError(t, Linear(y, nil, nil, []float32{1, 2}, 2, 0, 2))
	assert.Equal(t, []float32{1, 2, 1, 2}, y, "x·Wᵀ over no inputs is the bias")
	require.NoError(t, Linear(y, nil, nil, nil, 2, 0, 2))
	assert.Equal(t, []float32{0, 0, 0, 0}, y)
	require.NoError(t, Softmax(nil, 0, 5))

	// softmax over no keys is empty and its product with no values 0,
	// as torch.softmax(empty) @ v gives.
	out := []float32{9, 9, 9, 9}
	require.NoError(t, Attend(out, []float32{1, 2, 3, 4}, nil, nil, Attention{Batch: 1, Heads: 1, Queries: 2, Keys: 0, HeadDim: 2}))
	assert.Equal(t, []float32{0, 0, 0, 0}, out)
	require.NoError(t, Attend(nil, nil, nil, nil, Attention{Batch: 0, Heads: 2, Queries: 3, Keys: 3, HeadDim: 4}))
}
