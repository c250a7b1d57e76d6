package layers

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/registry"
)

// TestContextMask: mask.context cuts the block of the tokens' rows and the
// keys' columns from a (B, 1, rows, columns) mask as 1 where it is not 0:
// the first T rows and columns in Forward; in a session, the rows of each
// step's tokens at the session's position (after a resume, too) and the
// columns of every key so far, as Megatron's GPT-2 slices its mask at the
// KV cache's length; float32 and int64 masks alike. A context too short
// for the tokens is an error.
func TestContextMask(t *testing.T) {
	// one sequence, a 5×5 mask whose entry (r, c) is r·10 + c + 1, 0 at (r, 0)
	// for odd r and on the diagonal's right
	m := make([]float32, 25)
	for r := range 5 {
		for c := range 5 {
			if c <= r && (c > 0 || r%2 == 0) {
				m[r*5+c] = float32(r*10 + c + 1)
			}
		}
	}
	mask := tensor.New(tensor.WithShape(1, 1, 5, 5), tensor.WithBacking(m))
	tokens := func(t int) *tensor.Dense {
		return tensor.New(tensor.WithShape(1, t, 2), tensor.WithBacking(make([]float32, 2*t)))
	}
	c := &ContextMask{}

	got, err := c.Forward(nil, []*tensor.Dense{tokens(3), mask})
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{1, 1, 3, 3}, got.Shape())
	assert.Equal(t, []float32{1, 0, 0, 0, 1, 0, 1, 1, 1}, got.Data())

	s := c.NewState()
	got, err = c.Step(&registry.Run{}, s, []*tensor.Dense{tokens(2), mask})
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 0, 0, 1}, got.Data())
	got, err = c.Step(&registry.Run{}, s, []*tensor.Dense{tokens(2), mask})
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{1, 1, 2, 4}, got.Shape())
	assert.Equal(t, []float32{1, 1, 1, 0, 0, 1, 1, 1}, got.Data())
	assert.Equal(t, 4, s.Tokens())
	_, err = c.Step(&registry.Run{}, s, []*tensor.Dense{tokens(2), mask})
	require.EqualError(t, err, "mask shape (1, 1, 5, 5) covers 5×5 positions, the tokens so far are 6")
	assert.Equal(t, 4, s.Tokens(), "a failed step leaves the session")

	s = c.NewState()
	require.NoError(t, c.Resume(s, 1, 4, nil, nil))
	got, err = c.Step(&registry.Run{}, s, []*tensor.Dense{tokens(1), mask})
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 1, 1, 1, 1}, got.Data())

	ids := make([]int64, 25) // the same mask as int64
	for i, x := range m {
		ids[i] = int64(x)
	}
	got, err = c.Forward(nil, []*tensor.Dense{tokens(3), tensor.New(tensor.WithShape(1, 1, 5, 5), tensor.WithBacking(ids))})
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 0, 0, 0, 1, 0, 1, 1, 1}, got.Data())

	_, err = c.Forward(nil, []*tensor.Dense{tokens(3), tensor.New(tensor.WithShape(2, 1, 5, 5), tensor.WithBacking(make([]float32, 50)))})
	require.EqualError(t, err, "mask shape (2, 1, 5, 5): want (B, heads, rows, columns) for 1 sequence(s)")
}
