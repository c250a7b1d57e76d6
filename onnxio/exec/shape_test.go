package exec

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// run is one visit of walk.
type run struct{ off, n, step []int }

func walkRuns(shape []int, strides ...[]int) []run {
	var runs []run
	walk(shape, strides, func(off []int, n int, step []int) {
		runs = append(runs, run{append([]int(nil), off...), []int{n}, append([]int(nil), step...)})
	})
	return runs
}

func TestWalk(t *testing.T) {
	// Contiguous dimensions merge into one run.
	assert.Equal(t, []run{{[]int{0}, []int{6}, []int{1}}}, walkRuns(dims(2, 3), dims(3, 1)))
	// A transposed read cannot merge: one run per row of the output.
	assert.Equal(t, []run{
		{[]int{0, 0}, []int{2}, []int{3, 1}},
		{[]int{1, 2}, []int{2}, []int{3, 1}},
		{[]int{2, 4}, []int{2}, []int{3, 1}},
	}, walkRuns(dims(3, 2), dims(1, 3), dims(2, 1)))
	// Equal non-zero strides are not contiguous: (i, j) at i + j.
	assert.Equal(t, []run{{[]int{0}, []int{2}, []int{1}}, {[]int{1}, []int{2}, []int{1}}},
		walkRuns(dims(2, 2), dims(1, 1)))
	// Broadcast (stride 0) dimensions merge with each other; size-1
	// dimensions vanish.
	assert.Equal(t, []run{{[]int{0, 0}, []int{6}, []int{0, 1}}}, walkRuns(dims(2, 1, 3), dims(0, 0, 0), dims(3, 3, 1)))
	// A scalar is one run of one; an empty shape has none.
	assert.Equal(t, []run{{[]int{0}, []int{1}, []int{0}}}, walkRuns(dims(), dims()))
	assert.Empty(t, walkRuns(dims(2, 0), dims(0, 1)))
}

func TestBroadcastShapes(t *testing.T) {
	s, err := broadcastShapes(dims(2, 1, 3), dims(4, 1), dims())
	assert.NoError(t, err)
	assert.Equal(t, dims(2, 4, 3), s)
	// (3, 1) read as (2, 3, 4): no leading stride, 1 along 3, 0 along 4.
	assert.Equal(t, dims(0, 1, 0), broadcastStrides(dims(3, 1), dims(2, 3, 4)))
	assert.Equal(t, dims(0, 4, 1), broadcastStrides(dims(1, 3, 4), dims(2, 3, 4)))
	_, err = broadcastShapes(dims(2, 3), dims(3, 2), dims(1))
	assert.EqualError(t, err, "shapes (2, 3), (3, 2) and (1,) do not broadcast")
}

func TestCheckExtent(t *testing.T) {
	assert.NoError(t, checkExtent(dims(1<<40, 1<<40, 1<<40)), "non-empty shapes are the budget's to refuse")
	assert.NoError(t, checkExtent(dims(0, 1<<16, 1<<16)))
	assert.EqualError(t, checkExtent(dims(0, 1<<16, 1<<16+1)),
		"shape (0, 65536, 65537) is empty, but its other dimensions multiply to more than 4294967296")
	assert.ErrorContains(t, checkExtent(dims(1<<62, 1<<62, 0)), "multiply to more than")
	assert.EqualError(t, checkExtent(dims(2, -1)), "negative dimension in shape (2, -1)")
}
