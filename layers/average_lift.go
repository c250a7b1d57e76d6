package layers

import (
	"math"
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// attention.average in ONNX graphs: A @ x with A the constant causal
// averaging matrix, row t holding 1/(t+1) in its first t+1 columns.

func init() {
	match.RegisterPattern(match.Pattern{Name: "attention.average", Op: "MatMul", Late: true, Match: liftAverage})
}

// liftAverage lifts a MatMul anchor of a constant and computed tokens.
func liftAverage(g match.Graph, n *match.Node) (*match.Layer, error) {
	ins := n.Inputs()
	A, x := ins[0], ins[1]
	if A == "" || g.IsData(A) || !g.IsData(x) {
		return nil, nil
	}
	anchor := []*match.Node{n}
	for i := range g.Probes() {
		xs, err := g.ShapeAt(i, x)
		if err != nil {
			return nil, match.Refuse(anchor, "%v", err)
		}
		_, T, _, ok := match.Tokens(xs)
		if !ok {
			return nil, match.Refuse(anchor, "%q has shape %s; attnrun layers take (T, d) or (B, T, d)", x, fmtShape(xs))
		}
		t, err := g.ValueAt(i, A)
		if err != nil {
			return nil, match.Refuse(anchor, "%v", err)
		}
		s := []int(t.Shape())
		if !slices.Equal(s, []int{T, T}) && !slices.Equal(s, []int{1, T, T}) {
			return nil, match.Refuse(anchor, "multiplies tokens by a constant %s matrix; the causal average is %d×%d", fmtShape(s), T, T)
		}
		vals, _ := match.Floats(t)
		for k, v := range vals {
			r, c := k/T%T, k%T
			want := 0.0
			if c <= r {
				want = 1 / float64(r+1)
			}
			if math.Abs(v-want) > 1e-6*math.Max(1, want) {
				return nil, match.Refuse(anchor, "multiplies tokens by a constant matrix that is not the causal average (row %d, column %d is %g)", r, c, v)
			}
		}
	}
	return &match.Layer{Type: "attention.average", Name: "avg", Inputs: []string{x}, Output: n.Output(), Nodes: anchor}, nil
}
