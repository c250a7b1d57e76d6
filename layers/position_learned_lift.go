package layers

import (
	"fmt"
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// position.learned in ONNX graphs: x + P, where P is the first T rows of
// a (C, d) table for tokens x of shape (…, T, d), however the exporter
// cuts it (a Slice by the sequence length, a Gather of positions, or the
// rows a static export kept), possibly expanded over the batch.

func init() {
	match.RegisterPattern(match.Pattern{Name: "position.learned", Op: "Add", Late: true, Match: liftPositionLearned})
}

// liftPositionLearned lifts an Add anchor of computed tokens and a
// constant.
func liftPositionLearned(g match.Graph, n *match.Node) (*match.Layer, error) {
	ins := n.Inputs()
	x, pos := ins[0], ins[1]
	if g.IsData(x) && g.IsData(pos) {
		return nil, nil // nn.add's
	}
	if x != "" && !g.IsData(x) {
		x, pos = pos, x
	}
	anchor := []*match.Node{n}
	table, rows := "", 0
	for _, cand := range g.Sources(pos) {
		if isTablePrefix(g, cand, x, pos) {
			s, _ := g.ShapeAt(0, cand)
			table, rows = cand, s[0]
			break
		}
	}
	if table == "" {
		return nil, match.Refuse(anchor, "adds the constant %q, which is not the first rows of a position table (one row per token)", pos)
	}
	t, err := g.ValueAt(0, table)
	if err != nil {
		return nil, err
	}
	w, err := match.Float32(t)
	if err != nil {
		return nil, err
	}
	l := &match.Layer{Type: "position.learned", Name: "pos", Inputs: []string{x}, Output: n.Output(), Nodes: anchor,
		Config: []match.Field{{Key: "context_length", Value: rows}, {Key: "d", Value: t.Shape()[1]}},
		Params: []match.Param{{Name: "weight", Value: w, From: table}}}
	if g.Probes() == 1 && g.Producer(pos) == nil {
		l.Notes = append(l.Notes, fmt.Sprintf("the exporter kept only the %d rows this static graph uses; context_length is %d", rows, rows))
	}
	return l, nil
}

// isTablePrefix reports whether, at every probe, pos holds rows 0..T-1 of
// table, shaped (T, d) or (1, T, d), for tokens x of shape (…, T, d).
func isTablePrefix(g match.Graph, table, x, pos string) bool {
	for i := range g.Probes() {
		xs, err := g.ShapeAt(i, x)
		if err != nil {
			return false
		}
		_, T, D, ok := match.Tokens(xs)
		if !ok {
			return false
		}
		tt, err1 := g.ValueAt(i, table)
		pt, err2 := g.ValueAt(i, pos)
		if err1 != nil || err2 != nil || tt.Dims() != 2 || tt.Shape()[1] != D || tt.Shape()[0] < T {
			return false
		}
		ps := []int(pt.Shape())
		batched := len(xs) == 3 && slices.Equal(ps, []int{xs[0], T, D}) // positions expanded over the batch (BERT of PyTorch 1.x)
		if !slices.Equal(ps, []int{T, D}) && !slices.Equal(ps, []int{1, T, D}) && !batched {
			return false
		}
		tv, _ := match.Floats(tt)
		pv, _ := match.Floats(pt)
		for k, v := range pv {
			if tv[k%(T*D)] != v {
				return false
			}
		}
	}
	return true
}
