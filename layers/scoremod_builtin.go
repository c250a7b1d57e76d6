package layers

import (
	"errors"
	"fmt"
	"math"

	"github.com/attnrun/attnrun/registry"
	"gorgonia.org/tensor"
)

// builtinScoreMods are the built-in score modifications: the examples of
// PyTorch's flex_attention documentation that are not already masks of
// attention.sdpa (causal and sliding windows are its own fields), and the
// two that real graphs need (T5's relative bias, a uniform shift).
var builtinScoreMods = []ScoreModInfo{
	{Type: "softcap", Summary: "cap · tanh(score / cap) (Gemma 2, Grok)",
		New: func() ScoreMod { return &SoftcapMod{} }},
	{Type: "alibi", Summary: "score + m_h · (key − query), ALiBi's slopes",
		New: func() ScoreMod { return &ALiBiMod{} }},
	{Type: "relative_bias", Summary: "score + a learned bias per head and clipped distance key − query",
		New: func() ScoreMod { return &RelativeBiasMod{} }},
	{Type: "document_mask", Summary: "−Inf between tokens of different documents packed in one sequence",
		New: func() ScoreMod { return &DocumentMaskMod{} }},
	{Type: "shift", Summary: "score + by, one number added to every score (a mask hiding every key alike)",
		New: func() ScoreMod { return &ShiftMod{} }},
}

func init() {
	for _, info := range builtinScoreMods {
		RegisterScoreMod(info)
	}
}

var (
	_ ScoreMod       = (*SoftcapMod)(nil)
	_ ScoreMod       = (*ALiBiMod)(nil)
	_ ScoreMod       = (*RelativeBiasMod)(nil)
	_ ScoreModParams = (*RelativeBiasMod)(nil)
	_ ScoreMod       = (*DocumentMaskMod)(nil)
	_ ScoreMod       = (*ShiftMod)(nil)
)

// ShiftMod is score_mod shift: score + by, the same number added to every
// score, as a mask that hides every key alike adds it (ONNX Runtime's BERT
// tests fold an attention_mask of zeros into −10000 on every score). The
// softmax is the same but for rounding, which the shift decides: scores
// near 0 shifted by −10000 keep about three decimals, as in the graph.
type ShiftMod struct {
	// By is the number added; it must be finite.
	By float64 `yaml:"by"`
}

// Prepare checks that by is a finite float32.
func (m *ShiftMod) Prepare(ScoreModShape) error {
	if math.IsNaN(m.By) || math.Abs(m.By) > math.MaxFloat32 {
		return fmt.Errorf("by must be a finite float32, got %g", m.By)
	}
	return nil
}

// Modify adds by to the row, in float32.
func (m *ShiftMod) Modify(row []float32, _, _, _, _ int) {
	by := float32(m.By)
	for j := range row {
		row[j] += by
	}
}

// ExportONNX is Add(scores, by).
func (m *ShiftMod) ExportONNX(g registry.GraphBuilder, scores string, _ *ScoreIndices) string {
	return g.Node("Add", operands(scores, g.ScalarFloat(float32(m.By))))
}

// SoftcapMod is score_mod softcap: cap · tanh(score / cap), computed in
// float64, as attention.sdpa's softcap field (which comes first, when both
// are set).
type SoftcapMod struct {
	// Cap bounds the scores to (−cap, cap); it must be positive.
	Cap float64 `yaml:"cap"`
}

// Prepare checks that cap is a positive number.
func (m *SoftcapMod) Prepare(ScoreModShape) error {
	if !(m.Cap > 0) || math.IsInf(m.Cap, 0) {
		return fmt.Errorf("cap must be a positive number, got %g", m.Cap)
	}
	return nil
}

// Modify caps the row.
func (m *SoftcapMod) Modify(row []float32, _, _, _, _ int) {
	for j, s := range row {
		row[j] = float32(m.Cap * math.Tanh(float64(s)/m.Cap))
	}
}

// ExportONNX is Mul(Tanh(Div(scores, cap)), cap).
func (m *SoftcapMod) ExportONNX(g registry.GraphBuilder, scores string, _ *ScoreIndices) string {
	c := g.ScalarFloat(float32(m.Cap))
	return g.Node("Mul", operands(g.Node("Tanh", operands(g.Node("Div", operands(scores, c)))), c))
}

// ALiBiMod is score_mod alibi: score + m_h · (key − query), with the slopes
// m_h of ALiBi (Press et al.) for the layer's query heads, as
// position.alibi and attention.sdpa's alibi field compute them.
type ALiBiMod struct {
	slopes []float32
}

// Prepare computes the slopes.
func (m *ALiBiMod) Prepare(shape ScoreModShape) error {
	if shape.Heads <= 0 {
		return fmt.Errorf("needs a positive number of heads, got %d", shape.Heads)
	}
	m.slopes = alibiSlopes(shape.Heads)
	return nil
}

// Modify adds the bias of head h.
func (m *ALiBiMod) Modify(row []float32, _, h, q, k0 int) {
	slope := m.slopes[h]
	for j := range row {
		row[j] += slope * float32(k0+j-q)
	}
}

// ExportONNX adds slopes (1, H, 1, 1) times the distance key − query.
func (m *ALiBiMod) ExportONNX(g registry.GraphBuilder, scores string, ix *ScoreIndices) string {
	dist := g.Node("Cast", operands(g.Node("Sub", operands(ix.Key(), ix.Query()))), registry.IntAttr("to", onnxFloat))
	slopes := g.ConstFloat(m.slopes, 1, int64(len(m.slopes)), 1, 1)
	return g.Node("Add", operands(scores, g.Node("Mul", operands(slopes, dist))))
}

// RelativeBiasMod is score_mod relative_bias: score + bias[h, d], a learned
// bias per query head and distance d = key − query, clipped to
// ±(max_distance − 1). Its parameter "bias" is (num_heads,
// 2·max_distance − 1), column d + max_distance − 1 for distance d, zeros
// when fresh.
type RelativeBiasMod struct {
	// MaxDistance is the number of distances each way that have their own
	// bias, 0 included; farther keys share the last one.
	MaxDistance int `yaml:"max_distance"`

	bias *tensor.Dense
}

var _ ScoreModPlanner = (*RelativeBiasMod)(nil)

// PlanParams checks max_distance and lists the bias, (num_heads,
// 2·max_distance − 1).
func (m *RelativeBiasMod) PlanParams(shape ScoreModShape) ([]registry.ParamShape, error) {
	if m.MaxDistance <= 0 || m.MaxDistance > maxElements/2 {
		return nil, fmt.Errorf("max_distance must be positive, got %d", m.MaxDistance)
	}
	return []registry.ParamShape{{Name: "bias", Shape: []int{shape.Heads, 2*m.MaxDistance - 1}}}, nil
}

// Prepare checks max_distance and allocates the bias.
func (m *RelativeBiasMod) Prepare(shape ScoreModShape) error {
	if _, err := m.PlanParams(shape); err != nil {
		return err
	}
	bias, err := newZeros("bias", shape.Heads, 2*m.MaxDistance-1)
	if err != nil {
		return err
	}
	m.bias = bias
	return nil
}

// Params lists bias.
func (m *RelativeBiasMod) Params() []registry.Param {
	return []registry.Param{{Name: "bias", Value: m.bias, Init: registry.ConstantInit(0)}}
}

// Modify adds head h's bias for each key's distance.
func (m *RelativeBiasMod) Modify(row []float32, _, h, q, k0 int) {
	n := m.MaxDistance
	table := floats(m.bias)[h*(2*n-1) : (h+1)*(2*n-1)]
	for j := range row {
		d := min(max(k0+j-q, 1-n), n-1)
		row[j] += table[d+n-1]
	}
}

// ExportONNX gathers the bias from the flattened table at
// h·(2n−1) + clip(key − query) + n − 1.
func (m *RelativeBiasMod) ExportONNX(g registry.GraphBuilder, scores string, ix *ScoreIndices) string {
	n := int64(m.MaxDistance)
	dist := g.Node("Sub", operands(ix.Key(), ix.Query()))
	dist = g.Node("Max", operands(g.Node("Min", operands(dist, g.ScalarInt64(n-1))), g.ScalarInt64(1-n)))
	row := g.Node("Mul", operands(ix.Head(), g.ScalarInt64(2*n-1)))
	at := g.Node("Add", operands(g.Node("Add", operands(row, dist)), g.ScalarInt64(n-1)))
	table := g.Node("Reshape", operands(g.Param("bias"), g.ConstInt64([]int64{-1})))
	return g.Node("Add", operands(scores, g.Node("Gather", operands(table, at), registry.IntAttr("axis", 0))))
}

// DocumentMaskMod is score_mod document_mask: several documents packed one
// after another into each sequence, a query seeing only keys of its own
// document (flex_attention's document masking). Tokens past the listed
// documents belong to the last one, as the tokens decoded after a packed
// prompt continue its last document.
type DocumentMaskMod struct {
	// Lengths are the documents' lengths in tokens, in order.
	Lengths []int `yaml:"lengths"`

	ids []int64 // document of each position up to the total length
}

// Prepare checks the lengths and numbers each position's document.
func (m *DocumentMaskMod) Prepare(ScoreModShape) error {
	if len(m.Lengths) == 0 {
		return errors.New("lengths must list at least one document length")
	}
	total := 0
	for i, n := range m.Lengths {
		if n <= 0 || n > maxElements-total {
			return fmt.Errorf("lengths[%d] must be a positive length (and the total at most %d), got %d", i, maxElements, n)
		}
		total += n
	}
	m.ids = make([]int64, 0, total)
	for doc, n := range m.Lengths {
		for range n {
			m.ids = append(m.ids, int64(doc))
		}
	}
	return nil
}

// document returns the document of position p.
func (m *DocumentMaskMod) document(p int) int64 { return m.ids[min(p, len(m.ids)-1)] }

// Modify sets the scores of keys of other documents to −Inf.
func (m *DocumentMaskMod) Modify(row []float32, _, _, q, k0 int) {
	doc := m.document(q)
	for j := range row {
		if m.document(k0+j) != doc {
			row[j] = negInf
		}
	}
}

// ExportONNX is Where(Equal(doc[query], doc[key]), scores, −Inf), the
// positions clipped to the table.
func (m *DocumentMaskMod) ExportONNX(g registry.GraphBuilder, scores string, ix *ScoreIndices) string {
	ids := g.ConstInt64(m.ids)
	last := g.ScalarInt64(int64(len(m.ids) - 1))
	doc := func(pos string) string {
		return g.Node("Gather", operands(ids, g.Node("Min", operands(pos, last))), registry.IntAttr("axis", 0))
	}
	same := g.Node("Equal", operands(doc(ix.Query()), doc(ix.Key())))
	return g.Node("Where", operands(same, scores, g.ScalarFloat(negInf)))
}
