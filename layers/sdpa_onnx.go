package layers

import (
	"errors"
	"math"

	"github.com/attnrun/attnrun/internal/attn"
	"github.com/attnrun/attnrun/registry"
)

var (
	_ registry.Exporter  = (*SDPA)(nil)
	_ registry.InputDims = (*SDPA)(nil)
)

// ONNXInputDims reports the mask input, last when mask is configured, as
// a 4-D mask (batch, heads, queries, keys), each dimension its size or 1
// (a (Tq, Tk) mask is fed as (1, 1, Tq, Tk), a key-padding mask as
// (B, 1, 1, Tk)). export.Model declares the model input with that rank.
func (s *SDPA) ONNXInputDims(n int) map[int][]string {
	if s.c == nil || s.c.mask == 0 || n < 2 {
		return nil
	}
	return map[int][]string{n - 1: {"batch", "heads", "queries", "keys"}}
}

// ExportONNX writes the layer in one of three forms.
//
// When the export allows ONNX's ai.onnx.preview domain
// (export.Options.Preview), the attention is its FlexAttention op
// (see exportFlexAttention), whatever the opset.
//
// From opset 23 on, it is ONNX's Attention op on the projections (3-D,
// with q_num_heads and kv_num_heads, so grouped-query attention is the
// op's own), with RotaryEmbedding for rope, the softcap and an explicit
// scale as attributes, and is_causal for self-attention and top-left
// cross-attention. The op aligns a causal mask top-left, so bottom-right
// cross-attention gets the causal frontier in an explicit mask, as do the
// window, ALiBi and the mask input; the op takes one mask, so they are
// joined (a float mask when any part is a float, −Inf where hidden) and
// expanded to (…, Tq, Tk), the only masks ONNX Runtime 1.30 accepts.
// From opset 25 on, the window of a layer whose causal frontier is
// is_causal is the op's left_window_size (window − 1) instead (ONNX
// Runtime 1.31 does not know the attribute yet).
//
// Before opset 23, and where the op cannot say what the layer does (a
// non-positive scale; masked_rows: nan when a query may see no key: the op
// gives zeros), it is the computation written out: heads split by Reshape
// and Transpose, RoPE from Slice, Mul and Concat, KV heads repeated by
// Expand for grouped-query attention, MatMul, scale, softcap by Tanh, the
// masks by Add and Where, Softmax, and a Where that gives zeros to queries
// that see no key. Dropout is the identity, as at inference.
func (s *SDPA) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	c := s.c
	if c == nil {
		return "", errNotValidated
	}
	in, err := c.onnxInputs(inputs)
	if err != nil {
		return "", err
	}
	if d, ok := g.(registry.DomainBuilder); ok && d.DomainVersion(previewDomain) >= 1 {
		return c.exportFlexAttention(g, d, in), nil
	}
	if g.Opset() >= attentionOpset && c.fitsAttentionOp(in) {
		return c.exportAttentionOp(g, in), nil
	}
	return c.exportDecomposed(g, in), nil
}

// onnxInputs sorts the input values as split sorts tensors.
func (c *sdpaPrepared) onnxInputs(inputs []string) (sdpaSorted[string], error) {
	in, err := sortSDPAInputs(inputs, c.mask != 0)
	if err == nil && in.cross && (c.rot != nil || c.slopes != nil) {
		err = errors.New("rope and alibi apply to self-attention; this layer got a memory input")
	}
	return in, err
}

// mayHideRows reports whether some query may see no key: a mask can hide
// anything, and a bottom-right causal frontier hides every key from the
// first Tq − Tk queries. Causal self-attention and windows always keep the
// query's own key.
func (c *sdpaPrepared) mayHideRows(in sdpaSorted[string]) bool {
	return c.mask != 0 || (in.cross && c.causal && !c.topLeft)
}

// fitsAttentionOp reports whether the Attention op computes the layer: it
// has no sinks and no score_mod, and gives zeros to queries that see no
// key.
func (c *sdpaPrepared) fitsAttentionOp(in sdpaSorted[string]) bool {
	return c.scale > 0 && !(c.nanRows && c.mayHideRows(in)) && c.sinks == nil && c.mods.Len() == 0
}

// exportAttentionOp writes the projections, RotaryEmbedding, one
// Attention node and the output projection.
func (c *sdpaPrepared) exportAttentionOp(g registry.GraphBuilder, in sdpaSorted[string]) string {
	q := linearONNX(g, c.q, "q_proj", in.x)
	k := linearONNX(g, c.k, "k_proj", in.memory)
	v := linearONNX(g, c.v, "v_proj", in.memory)
	switch {
	case c.qkWhole: // over the whole (B, T, H·d) projections
		q, k = c.qkNormONNX(g, "q_norm", q), c.qkNormONNX(g, "k_norm", k)
	case c.qNorm != nil: // per head: (B, T, H·d) → (B, T, H, d) and back
		q = mergeLastONNX(g, c.qkNormONNX(g, "q_norm", splitLastONNX(g, q, c.heads, c.headDim)), c.hdim)
		k = mergeLastONNX(g, c.qkNormONNX(g, "k_norm", splitLastONNX(g, k, c.kvHeads, c.headDim)), c.kvHeads*c.headDim)
	}
	if c.rot != nil {
		cos, sin, pos := c.rot.rotaryInputsONNX(g, in.x)
		q = c.rot.rotaryEmbeddingONNX(g, q, cos, sin, pos, c.heads)
		k = c.rot.rotaryEmbeddingONNX(g, k, cos, sin, pos, c.kvHeads)
	}
	isCausal := c.causal && (!in.cross || c.topLeft)
	op := attentionOp{heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDim, causal: isCausal, scale: c.scale, softcap: c.softcap}
	masked := c
	if isCausal && c.window > 0 && g.Opset() >= windowOpset {
		// The op's window is aligned as is_causal is: it leaves the mask.
		op.window = c.window
		unwindowed := *c
		unwindowed.window = 0
		masked = &unwindowed
	}
	mask := attentionMaskONNX(g, masked.scoreMask(g, in, !isCausal), in.x, in.memory)
	return linearONNX(g, c.out, c.outName, op.node(g, q, k, v, mask))
}

// windowOpset is the first opset whose Attention op has sliding windows
// (left_window_size, right_window_size).
const windowOpset = 25

// attentionOp is one ONNX Attention node (opset 23) on 3-D projections:
// q (B, Tq, heads·headDim), k and v (B, Tk, kvHeads·headDim).
type attentionOp struct {
	heads, kvHeads, headDim int
	// causal sets is_causal: query i sees keys j ≤ i (top-left).
	causal bool
	// window > 0 (opset 25, with causal) lets query i see keys j > i − window
	// only: left_window_size window − 1.
	window int
	// scale multiplies the scores; 0 or 1/√headDim is the op's default and
	// writes no attribute.
	scale, softcap float32
}

// node adds the Attention node and returns Y (B, Tq, heads·headDim). mask
// is its attn_mask ("" for none): bool (true attends) or float (added), of
// shape (…, Tq, Tk), as attentionMaskONNX makes it.
func (op attentionOp) node(g registry.GraphBuilder, q, k, v, mask string) string {
	attrs := []registry.Attr{registry.IntAttr("q_num_heads", int64(op.heads)), registry.IntAttr("kv_num_heads", int64(op.kvHeads))}
	if op.causal {
		attrs = append(attrs, registry.IntAttr("is_causal", 1))
	}
	if op.window > 0 {
		attrs = append(attrs, registry.IntAttr("left_window_size", int64(op.window-1)))
	}
	if op.scale != 0 && op.scale != invSqrt(op.headDim) {
		attrs = append(attrs, registry.FloatAttr("scale", op.scale))
	}
	if op.softcap > 0 {
		attrs = append(attrs, registry.FloatAttr("softcap", op.softcap))
	}
	ins := operands(q, k, v)
	if mask != "" {
		ins = append(ins, mask)
	}
	return g.Node("Attention", ins, attrs...)
}

// exportDecomposed writes the attention out of standard ops.
func (c *sdpaPrepared) exportDecomposed(g registry.GraphBuilder, in sdpaSorted[string]) string {
	q, k, v := c.headsONNX(g, in)
	if c.kvHeads < c.heads {
		k = repeatHeadsONNX(g, k, c.kvHeads, c.heads, c.headDim)
		v = repeatHeadsONNX(g, v, c.kvHeads, c.heads, c.headDim)
	}
	rule := onnxScoreRule{scale: c.scale, softcap: c.softcap, mods: c.mods, mask: c.scoreMask(g, in, true), nanRows: c.nanRows}
	if c.sinks != nil {
		rule.sinks = g.Param("sinks")
	}
	context := rule.attend(g, q, k, v)
	return linearONNX(g, c.out, c.outName, mergeHeadsONNX(g, context, c.hdim))
}

// headsONNX writes the projections split into heads, q (B, heads, Tq, d),
// k and v (B, kv_heads, Tk, d), with qk_norm and RoPE.
func (c *sdpaPrepared) headsONNX(g registry.GraphBuilder, in sdpaSorted[string]) (q, k, v string) {
	q, k = linearONNX(g, c.q, "q_proj", in.x), linearONNX(g, c.k, "k_proj", in.memory)
	if c.qkWhole { // before the split, over the whole projections
		q, k = c.qkNormONNX(g, "q_norm", q), c.qkNormONNX(g, "k_norm", k)
	}
	q, k = splitHeadsONNX(g, q, c.heads, c.headDim), splitHeadsONNX(g, k, c.kvHeads, c.headDim)
	v = splitHeadsONNX(g, linearONNX(g, c.v, "v_proj", in.memory), c.kvHeads, c.headDim)
	if c.qNorm != nil && !c.qkWhole {
		q, k = c.qkNormONNX(g, "q_norm", q), c.qkNormONNX(g, "k_norm", k)
	}
	if c.rot != nil {
		cos, sin := c.rot.tablesONNX(g, in.x, 1)
		q, k = c.rot.rotateONNX(g, q, cos, sin), c.rot.rotateONNX(g, k, cos, sin)
	}
	return q, k, v
}

// qkNormONNX is qk_norm over the last axis, head_dim of split heads or
// H·head_dim of a whole projection: weight · x / √(mean(x²) + eps),
// written as norm.rms writes it (Pow, ReduceMean,
// Add, Sqrt, Div, Mul), with the weight named name+".weight".
func (c *sdpaPrepared) qkNormONNX(g registry.GraphBuilder, name, x string) string {
	meanSquare := reduceLastONNX(g, "ReduceMean", g.Node("Pow", operands(x, g.ScalarFloat(2))))
	rms := g.Node("Sqrt", operands(g.Node("Add", operands(meanSquare, g.ScalarFloat(float32(c.qkEps))))))
	return g.Node("Mul", operands(g.Node("Div", operands(x, rms)), g.Param(name+".weight")))
}

// splitLastONNX reshapes (B, T, heads·headDim) into (B, T, heads, headDim).
func splitLastONNX(g registry.GraphBuilder, y string, heads, headDim int) string {
	return g.Node("Reshape", operands(y, g.ConstInt64([]int64{0, 0, int64(heads), int64(headDim)})))
}

// mergeLastONNX reshapes (B, T, heads, headDim) back into (B, T, width).
func mergeLastONNX(g registry.GraphBuilder, y string, width int) string {
	return g.Node("Reshape", operands(y, g.ConstInt64([]int64{0, 0, int64(width)})))
}

// scoreMask builds what the layer adds to the scores besides scale and
// softcap: the causal frontier (when causal is set: the Attention op's
// is_causal may carry it instead), the window, ALiBi and the mask input.
func (c *sdpaPrepared) scoreMask(g registry.GraphBuilder, in sdpaSorted[string], causal bool) onnxScoreMask {
	m := onnxScoreMask{empty: c.mayHideRows(in)}
	causal = causal && c.causal
	if causal || c.window > 0 || c.slopes != nil {
		c.positionMask(g, in, causal, &m)
	}
	switch c.mask {
	case attn.MaskAdd: // after ALiBi, as Forward adds them
		m.add(g, in.mask)
	case attn.MaskKeep: // zero is hidden
		m.hide(g, g.Node("Equal", operands(in.mask, g.ScalarFloat(0))))
	case attn.MaskDrop: // nonzero is hidden
		m.hide(g, g.Node("Not", operands(g.Node("Equal", operands(in.mask, g.ScalarFloat(0))))))
	}
	return m
}

// positionMask adds to m what depends on the positions of queries and
// keys: the causal frontier (if causal), the window and ALiBi.
func (c *sdpaPrepared) positionMask(g registry.GraphBuilder, in sdpaSorted[string], causal bool, m *onnxScoreMask) {
	qLen := dimONNX(g, in.x, 1)
	qPos := g.Node("Range", operands(g.ScalarInt64(0), qLen, g.ScalarInt64(1)))
	kPos := qPos
	if in.cross {
		kLen := dimONNX(g, in.memory, 1)
		kPos = g.Node("Range", operands(g.ScalarInt64(0), kLen, g.ScalarInt64(1)))
		if !c.topLeft { // bottom-right: query i sits at position i + Tk − Tq
			qPos = g.Node("Add", operands(qPos, g.Node("Sub", operands(kLen, qLen))))
		}
	}
	if causal {
		m.hide(g, futureONNX(g, qPos, kPos))
	}
	if c.window > 0 { // query − key ≥ window: more than window−1 keys back
		back := g.Node("Sub", operands(
			g.Node("Unsqueeze", operands(qPos, g.ConstInt64([]int64{1}))),
			g.Node("Unsqueeze", operands(kPos, g.ConstInt64([]int64{0})))))
		reach := c.window - 1
		if !c.causal { // centred: more than (window−1)/2 keys away on either side
			back, reach = g.Node("Abs", operands(back)), (c.window-1)/2
		}
		m.hide(g, g.Node("Greater", operands(back, g.ScalarInt64(int64(reach)))))
	}
	if c.slopes != nil {
		m.add(g, alibiONNX(g, c.slopes, qPos, kPos))
	}
}

// onnxScoreMask is what an exported attention does to its scores between
// the scaled (and capped) product and the softmax.
type onnxScoreMask struct {
	// bias is a float value added to the scores (ALiBi, additive masks),
	// "" for none; it broadcasts to (B, H, Tq, Tk).
	bias string
	// hidden is a bool value, true where a key is hidden from a query
	// (−Inf), "" for none; it broadcasts to (B, H, Tq, Tk).
	hidden string
	// empty says a query may see no key, whose weights the softmax makes
	// NaN.
	empty bool
}

// add adds a float value to the bias.
func (m *onnxScoreMask) add(g registry.GraphBuilder, v string) {
	if m.bias == "" {
		m.bias = v
		return
	}
	m.bias = g.Node("Add", operands(m.bias, v))
}

// hide hides the keys where a bool value is true, besides those hidden.
func (m *onnxScoreMask) hide(g registry.GraphBuilder, v string) {
	if m.hidden == "" {
		m.hidden = v
		return
	}
	m.hidden = g.Node("Or", operands(m.hidden, v))
}

// attentionMaskONNX turns a score mask into the Attention op's attn_mask:
// bool (true attends) when nothing is added, float (−Inf where hidden)
// otherwise, expanded to (…, Tq, Tk) for the Tq tokens of x and Tk of src.
// It returns "" when there is no mask.
func attentionMaskONNX(g registry.GraphBuilder, m onnxScoreMask, x, src string) string {
	var mask string
	switch {
	case m.bias == "" && m.hidden == "":
		return ""
	case m.bias == "":
		mask = g.Node("Not", operands(m.hidden))
	case m.hidden == "":
		mask = m.bias
	default:
		mask = g.Node("Where", operands(m.hidden, g.ConstFloat([]float32{float32(math.Inf(-1))}), m.bias))
	}
	shape := g.Node("Concat", operands(g.ConstInt64([]int64{1, 1}), lengthONNX(g, x), lengthONNX(g, src)), registry.IntAttr("axis", 0))
	return g.Node("Expand", operands(mask, shape))
}

// lengthONNX is the sequence length of a (B, T, d) value as a 1-D int64 of
// one element, for building shapes.
func lengthONNX(g registry.GraphBuilder, x string) string {
	return g.Node("Gather", operands(g.Node("Shape", operands(x)), g.ConstInt64([]int64{1})), registry.IntAttr("axis", 0))
}

// splitHeadsONNX reshapes projections (B, T, heads·headDim) into heads
// (B, heads, T, headDim).
func splitHeadsONNX(g registry.GraphBuilder, y string, heads, headDim int) string {
	y = g.Node("Reshape", operands(y, g.ConstInt64([]int64{0, 0, int64(heads), int64(headDim)})))
	return g.Node("Transpose", operands(y), registry.IntsAttr("perm", 0, 2, 1, 3))
}

// mergeHeadsONNX joins heads (B, H, T, d) into (B, T, width = H·d).
func mergeHeadsONNX(g registry.GraphBuilder, y string, width int) string {
	y = g.Node("Transpose", operands(y), registry.IntsAttr("perm", 0, 2, 1, 3))
	return g.Node("Reshape", operands(y, g.ConstInt64([]int64{0, 0, int64(width)})))
}

// repeatHeadsONNX repeats each of the kvHeads heads of y (B, kvHeads, T, d)
// for heads/kvHeads consecutive query heads: (B, heads, T, d), so that
// query head h reads KV head ⌊h / (heads/kvHeads)⌋ (PyTorch's
// repeat_interleave on the head axis).
func repeatHeadsONNX(g registry.GraphBuilder, y string, kvHeads, heads, d int) string {
	y = g.Node("Unsqueeze", operands(y, g.ConstInt64([]int64{2}))) // (B, kvHeads, 1, T, d)
	y = g.Node("Expand", operands(y, g.ConstInt64([]int64{1, 1, int64(heads / kvHeads), 1, 1})))
	return g.Node("Reshape", operands(y, g.ConstInt64([]int64{0, int64(heads), -1, int64(d)})))
}

// attendHeadsONNX is softmax(mask(softcap(scale·q kᵀ))) v on heads
// (B, H, T, d). Queries that see no key get zero weights (a Where on the
// row maxima of the mask) unless nanRows keeps the softmax's NaN.
func attendHeadsONNX(g registry.GraphBuilder, q, k, v string, scale, softcap float32, m onnxScoreMask, nanRows bool) string {
	return onnxScoreRule{scale: scale, softcap: softcap, mask: m, nanRows: nanRows}.attend(g, q, k, v)
}

// onnxScoreRule is what an exported attention does between the product of
// queries and keys and the product with the values (scoreRule's
// counterpart).
type onnxScoreRule struct {
	scale, softcap float32
	mods           ScoreMods
	mask           onnxScoreMask
	// sinks is the (H) value of the sink logits, "" for none.
	sinks   string
	nanRows bool
}

// attend is softmax(mask(mods(softcap(scale·q kᵀ)))) v on heads
// (B, H, T, d), the softmax with a column of sinks if the rule has them.
func (r onnxScoreRule) attend(g registry.GraphBuilder, q, k, v string) string {
	scores := g.Node("MatMul", operands(q, g.Node("Transpose", operands(k), registry.IntsAttr("perm", 0, 1, 3, 2))))
	if r.scale != 1 {
		scores = g.Node("Mul", operands(scores, g.ScalarFloat(r.scale)))
	}
	scores = r.modify(g, scores)
	var weights string
	if r.sinks == "" {
		weights = g.Node("Softmax", operands(scores), registry.IntAttr("axis", -1))
	} else {
		weights = softmaxWithSinksONNX(g, scores, r.sinks)
	}
	if r.zeroesRows() {
		weights = g.Node("Where", operands(r.seesKeys(g, g.Node("Shape", operands(scores))), weights, g.ScalarFloat(0)))
	}
	return g.Node("MatMul", operands(weights, v))
}

// modify soft-caps and modifies the scaled scores and applies the mask.
func (r onnxScoreRule) modify(g registry.GraphBuilder, scores string) string {
	if r.softcap > 0 {
		capped := g.Node("Tanh", operands(g.Node("Div", operands(scores, g.ScalarFloat(r.softcap)))))
		scores = g.Node("Mul", operands(capped, g.ScalarFloat(r.softcap)))
	}
	scores = scoreModsONNX(g, r.mods, scores)
	if r.mask.bias != "" {
		scores = g.Node("Add", operands(scores, r.mask.bias))
	}
	if r.mask.hidden != "" {
		scores = g.Node("Where", operands(r.mask.hidden, g.ScalarFloat(negInf), scores))
	}
	return scores
}

// zeroesRows reports whether the weights of queries that see no key must
// be set to 0: some query may see none, and nanRows does not keep the
// softmax's NaN.
func (r onnxScoreRule) zeroesRows() bool {
	return (r.mask.empty || r.mods.Len() > 0) && !r.nanRows
}

// seesKeys is a bool value, true for the queries that see a key, of shape
// (…, Tq, 1) for scores of the given shape (B, H, Tq, Tk). It depends on
// the masks and on what the score modifications make of a score of 0,
// never on the scores, as in Forward: scores that are NaN keep their row
// NaN.
func (r onnxScoreRule) seesKeys(g registry.GraphBuilder, shape string) string {
	var keys string
	if r.mask.bias != "" || r.mask.hidden != "" {
		keys = r.mask.keyBias(g)
	}
	if r.mods.Len() > 0 {
		zeros := g.Node("Expand", operands(g.ScalarFloat(0), shape))
		modded := scoreModsONNX(g, r.mods, zeros)
		if keys == "" {
			keys = modded
		} else {
			keys = g.Node("Add", operands(keys, modded))
		}
	}
	top := reduceLastONNX(g, "ReduceMax", keys)
	return g.Node("Not", operands(g.Node("Equal", operands(top, g.ScalarFloat(negInf)))))
}

// softmaxWithSinksONNX is the softmax over the last axis of scores
// (B, H, Tq, Tk) with one more column, each head's sink logit from sinks
// (H), dropped after the softmax: gpt-oss's eager attention.
func softmaxWithSinksONNX(g registry.GraphBuilder, scores, sinks string) string {
	all := g.Node("Concat", operands(scores, sinkColumnONNX(g, scores, sinks)), registry.IntAttr("axis", -1))
	weights := g.Node("Softmax", operands(all), registry.IntAttr("axis", -1))
	return g.Node("Slice", operands(weights, g.ConstInt64([]int64{0}), g.ConstInt64([]int64{-1}), g.ConstInt64([]int64{-1})))
}

// keyBias is what the mask does to each score whatever the score: −Inf
// where hidden, the bias elsewhere (0 without one). A query whose row of
// it is all −Inf sees no key.
func (m *onnxScoreMask) keyBias(g registry.GraphBuilder) string {
	negInf := g.ScalarFloat(float32(math.Inf(-1)))
	switch {
	case m.hidden == "":
		return m.bias
	case m.bias == "":
		return g.Node("Where", operands(m.hidden, negInf, g.ScalarFloat(0)))
	}
	return g.Node("Where", operands(m.hidden, negInf, m.bias))
}
