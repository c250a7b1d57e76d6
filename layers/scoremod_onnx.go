package layers

import "github.com/attnrun/attnrun/registry"

// ScoreIndices are the indices along the axes of a (B, H, Tq, Tk) scores
// value, as int64 values that broadcast against it: what flex_attention
// passes a score_mod as b, h, q_idx and kv_idx. Each is computed from the
// scores' shape (Shape, Range, Reshape) the first time it is asked for, so
// a modification that needs none adds no node.
type ScoreIndices struct {
	g      registry.GraphBuilder
	scores string
	axes   [4]string // batch, head, query, key: "" until built
}

// newScoreIndices returns the indices of the axes of scores.
func newScoreIndices(g registry.GraphBuilder, scores string) *ScoreIndices {
	return &ScoreIndices{g: g, scores: scores}
}

// Batch is the sequence index b, shaped (B, 1, 1, 1).
func (ix *ScoreIndices) Batch() string { return ix.axis(0) }

// Head is the query head index h, shaped (1, H, 1, 1).
func (ix *ScoreIndices) Head() string { return ix.axis(1) }

// Query is the query index, shaped (1, 1, Tq, 1).
func (ix *ScoreIndices) Query() string { return ix.axis(2) }

// Key is the key index, shaped (1, 1, 1, Tk).
func (ix *ScoreIndices) Key() string { return ix.axis(3) }

// axis builds (once) the indices along axis a: 0, 1, ... reshaped to lie
// along that axis.
func (ix *ScoreIndices) axis(a int) string {
	if ix.axes[a] == "" {
		g := ix.g
		r := g.Node("Range", operands(g.ScalarInt64(0), dimONNX(g, ix.scores, int64(a)), g.ScalarInt64(1)))
		shape := []int64{1, 1, 1, 1}
		shape[a] = -1
		ix.axes[a] = g.Node("Reshape", operands(r, g.ConstInt64(shape)))
	}
	return ix.axes[a]
}

// scoreModsONNX applies the modifications in order to scores, each
// reaching its own parameters by the names it lists them under.
func scoreModsONNX(g registry.GraphBuilder, mods ScoreMods, scores string) string {
	ix := newScoreIndices(g, scores)
	for i, e := range mods.entries {
		scores = e.mod.ExportONNX(scopedBuilder{g, mods.where(i)}, scores, ix)
	}
	return scores
}

// scopedBuilder is the GraphBuilder of one score modification: Param
// names its parameters within the layer ("bias" is "score_mod.1.bias").
type scopedBuilder struct {
	registry.GraphBuilder
	prefix string
}

// Param returns the value of the modification's parameter name.
func (b scopedBuilder) Param(name string) string { return b.GraphBuilder.Param(b.prefix + "." + name) }
