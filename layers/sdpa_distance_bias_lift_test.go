package layers

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// distanceBias is a bias (1, H, T, T) whose head h adds f(h, key − query).
func distanceBias(H, T int, f func(h, d int) float32) *tensor.Dense {
	vals := make([]float32, 0, H*T*T)
	for h := range H {
		for q := range T {
			for k := range T {
				vals = append(vals, f(h, k-q))
			}
		}
	}
	return tensor.New(tensor.WithShape(1, H, T, T), tensor.WithBacking(vals))
}

// TestDistanceTableClipsWhereTheBiasStopsChanging reads a bias that changes
// up to distance 3 behind the query and 2 ahead (T5's buckets, shrunk) as
// relative_bias with max_distance 4, and checks the table against the bias
// at every distance of a sequence of 9.
func TestDistanceTableClipsWhereTheBiasStopsChanging(t *testing.T) {
	bucket := func(d int) int { return min(max(d, -3), 2) }
	f := func(h, d int) float32 { return float32(10*h + bucket(d)) }
	const T = 9
	table, err := distanceTable(distanceBias(2, T, f))
	require.NoError(t, err)
	reach := changingReach(table, T)
	assert.Equal(t, 3, reach)
	m, p, err := clippedTable(table, T, reach)
	require.NoError(t, err)
	assert.Equal(t, 4, m.MaxDistance)
	assert.Equal(t, []int{2, 7}, []int(p.Value.Shape()))
	require.NoError(t, m.Prepare(ScoreModShape{Heads: 2}))
	copy(floats(m.bias), floats(p.Value))
	for h := range 2 {
		for q := range T {
			row := make([]float32, T)
			m.Modify(row, 0, h, q, 0)
			for k, got := range row {
				assert.Equal(t, f(h, k-q), got, "head %d, query %d, key %d", h, q, k)
			}
		}
	}
}

// TestDistanceTableRefusesAPositionalBias refuses a bias that depends on
// the query's position, not only on the distance.
func TestDistanceTableRefusesAPositionalBias(t *testing.T) {
	vals := distanceBias(1, 4, func(_, d int) float32 { return float32(d) })
	vals.Data().([]float32)[4*2+3] = 7 // query 2, key 3
	_, err := distanceTable(vals)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "depends on more than the distance")
}
