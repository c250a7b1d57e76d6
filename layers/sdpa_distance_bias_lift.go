package layers

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// A bias added to the scores that the graph computes from the sequence
// length alone, the same for every query and key at one distance key −
// query: T5's relative position bias, a learned bias per head for each
// bucket of distances (exact near the query, logarithmic farther out, one
// bucket for every distance from max_distance on), computed by Range,
// bucket arithmetic and a Gather of the (buckets, heads) table. Whatever
// arithmetic computes it, it is score_mod relative_bias once its values
// are read per distance: the bias is evaluated at sequences long enough to
// show the distance from which it no longer changes, and the layer is
// run against the graph before the lift is accepted.

const (
	// firstStretch and maxStretch bound the sequence lengths the bias is
	// evaluated at: T5's max_distance is 128, its bias (heads, T, T).
	firstStretch = 32
	maxStretch   = 1024
)

// readDistanceBias reads the static bias (1, H, T, T) or (H, T, T) as
// RelativeBiasMod: each head's bias at each distance, the farthest
// distances clipped to the last one that differs. It evaluates the bias
// at longer sequences until it has stayed the same for at least as many
// distances as it changed over, and checks every element there.
func readDistanceBias(g match.Graph, bias string) (*RelativeBiasMod, match.Param, error) {
	for n := firstStretch; ; n *= 2 {
		t, err := g.Stretched(bias, n)
		if err != nil {
			return nil, match.Param{}, err
		}
		byDistance, err := distanceTable(t)
		if err != nil {
			return nil, match.Param{}, err
		}
		reach := changingReach(byDistance, n)
		if 2*reach <= n-1 {
			return clippedTable(byDistance, n, reach)
		}
		if n >= maxStretch { // else it may change again farther out: look farther
			return nil, match.Param{}, fmt.Errorf("the bias still changes %d positions from the query at sequences of %d", reach, n)
		}
	}
}

// distanceTable reads a bias (1, H, T, T) or (H, T, T) as each head's
// bias at distances −(T−1) … T−1 (column d + T − 1), and checks that every
// element is its head's bias at its distance.
func distanceTable(t *tensor.Dense) ([][]float32, error) {
	shape := t.Shape()
	if len(shape) == 4 && shape[0] == 1 {
		shape = shape[1:]
	}
	if len(shape) != 3 || shape[1] != shape[2] || shape[1] < 1 {
		return nil, fmt.Errorf("the bias has shape %v, not (1, heads, T, T)", t.Shape())
	}
	vals, err := match.Floats(t)
	if err != nil {
		return nil, err
	}
	H, T := shape[0], shape[1]
	table := make([][]float32, H)
	for h := range table {
		table[h] = make([]float32, 2*T-1)
		for d := 1 - T; d < T; d++ { // the first row or column that has distance d
			q := max(0, -d)
			table[h][d+T-1] = float32(vals[(h*T+q)*T+q+d])
		}
		for q := range T {
			for k := range T {
				if x := float32(vals[(h*T+q)*T+k]); x != table[h][k-q+T-1] {
					return nil, fmt.Errorf("head %d's bias for query %d and key %d is %g, for query %d and key %d %g: it depends on more than the distance key − query",
						h, q, k, x, max(0, q-k), max(0, q-k)+k-q, table[h][k-q+T-1])
				}
			}
		}
	}
	return table, nil
}

// changingReach is the farthest distance, either way, at which some head's
// bias differs from its bias one position farther out, plus one: from
// there on (up to the T − 1 the table holds) every distance has the bias
// of the last; 0 for a bias that is the same at every distance.
func changingReach(table [][]float32, T int) int {
	reach := 0
	for _, row := range table {
		for d := T - 2; d >= reach; d-- {
			if row[d+T-1] != row[d+T] || row[-d+T-1] != row[-d+T-2] {
				reach = d + 1
				break
			}
		}
	}
	return reach
}

// clippedTable is RelativeBiasMod with max_distance reach + 1, its bias
// each head's bias at distances −reach … reach.
func clippedTable(table [][]float32, T, reach int) (*RelativeBiasMod, match.Param, error) {
	n := reach + 1
	bias := make([]float32, 0, len(table)*(2*n-1))
	for _, row := range table {
		bias = append(bias, row[T-1-reach:T+reach]...)
	}
	t := tensor.New(tensor.WithShape(len(table), 2*n-1), tensor.WithBacking(bias))
	return &RelativeBiasMod{MaxDistance: n}, match.Param{Name: "bias", Value: t}, nil
}
