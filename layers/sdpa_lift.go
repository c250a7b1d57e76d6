package layers

import (
	"fmt"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// attention.sdpa in ONNX graphs, as ExportONNX writes it out of standard
// ops (exportDecomposed): before opset 23, and at every opset for sinks
// and score_mod, which the Attention op does not have. The attention
// recognizer declines what this form adds to plain attention (grouped-
// query heads, qk_norm, RoPE, a softmax with a sink column, modified
// scores, a mask input); this pattern reads it by structure:
//
//	q = split(x W_qᵀ) [qk_norm] [RoPE]      k, v = split(x W_kᵀ), split(x W_vᵀ) [qk_norm, RoPE on k] [repeated for GQA]
//	s = scale · q kᵀ → [softcap] → [score_mod ...] → [ALiBi, additive mask] → [causal, window, bool mask: −Inf]
//	w = Softmax(s) or Slice(Softmax(Concat(s, Expand(sinks))), drop the last column) → [Where: zeros for rows that see no key]
//	y = merge(w v) W_oᵀ + b_o
//
// where split is Reshape (B, T, H, d) then Transpose to (B, H, T, d), or
// heads picked out of a fused projection (GPT-NeoX's per-head packing,
// packedHeads; a (B, T, G, d) view cut by Slice, Gather, GatherND or Split,
// viewedHeads), and merge the reverse (sdpa_scores_lift.go reads the scores and weights);
// cross-attention projects its keys and values from a second input. It
// declines what it does not recognize unless the softmax has sinks or the scores are modified, which
// only this pattern lifts: then it names what it cannot read. The lifter
// builds the layer and runs it against the graph before accepting it.

func init() {
	match.RegisterPattern(match.Pattern{Name: "attention.sdpa/decomposed", Op: "Softmax", Match: liftSDPADecomposed})
}

// liftSDPADecomposed is the pattern's Match.
func liftSDPADecomposed(g match.Graph, softmax *match.Node) (*match.Layer, error) {
	if !lastAxis(g, softmax) {
		return nil, nil
	}
	w, err := readWeights(g, softmax)
	if w == nil || err != nil {
		return nil, err
	}
	s, err := readScores(g, w.scores)
	if err == nil {
		var l *match.Layer
		if l, err = s.layer(g, w); err == nil {
			return l, nil
		}
	}
	if w.sinks == nil && (s == nil || !s.modified()) {
		return nil, nil // plain attention the recognizer refused: its reason stands
	}
	if !g.Registered("attention.sdpa") {
		return nil, match.Refuse([]*match.Node{softmax}, "attention with sinks or score_mod: no layer type attention.sdpa is registered in this build")
	}
	return nil, match.Refuse([]*match.Node{softmax}, "attention with sinks or score_mod: %v", err)
}

// sdpaScores is what the walk from the scores back to the projections
// found.
type sdpaScores struct {
	scale  float64
	causal bool
	// window is how many keys a query sees, 0 for all; topLeft the causal
	// alignment of cross-attention when it is not bottom-right.
	window  int
	topLeft bool
	// alibi is the alibi field (rather than score_mod alibi).
	alibi bool
	// mask is the kind of the mask input ("" for none, "bool" or
	// "additive"), maskPolarity a bool mask's polarity and maskInput the
	// graph input it is.
	mask, maskPolarity, maskInput string
	// keepInput is the graph input a keep mask is computed from, through
	// mask.padding into maskInput (Hugging Face's attention_mask); "" when
	// the mask is a graph input itself.
	keepInput string
	// softcap is the softcap field (0 for none); mods the score_mod
	// entries, in order, their types and each one's parameters.
	softcap   float64
	mods      []ScoreMod
	modTypes  []string
	modParams [][]match.Param
	// rope is the rotation of queries and keys, nil for none.
	rope *sdpaRope
	// touched records a step that modifies the scores (a cap, a bias, a
	// second mask), read or not.
	touched bool
	// q and k are the query and key projections; qNorm and kNorm their
	// RMSNorms, of each head or of the whole projections (nil without
	// qk_norm).
	q, k         *match.Linear
	qNorm, kNorm *match.RMSNorm
	heads, dim   int
	kvHeads      int
}

// modified reports whether the scores are soft-capped or modified, or
// pass through what looks like a modification.
func (s *sdpaScores) modified() bool { return s.touched || s.softcap > 0 || len(s.mods) > 0 }

// readHeads follows q and the transposed keys of the product of queries
// and keys back to their projections.
func (s *sdpaScores) readHeads(g match.Graph, product *match.Node) error {
	ins := slices.Clone(product.Inputs())
	for i := range ins { // PyTorch's decomposition scales Q and Kᵀ by √scale each
		if mul := g.Producer(ins[i]); mul != nil && mul.Op() == "Mul" {
			if x, c, ok := dataAndStatic(g, mul); ok {
				if f, ok := g.Scalar(c); ok {
					s.scale *= f
					ins[i] = x
				}
			}
		}
	}
	q, qRope, err := unrotated(g, ins[0])
	if err != nil {
		return err
	}
	q, qNorm := unnormalized(g, q)
	k, kvHeads, kRope, tokenKeys, err := unrotatedKeys(g, product, ins[1])
	if err != nil {
		return err
	}
	if (qRope == nil) != (kRope == nil) || qRope != nil && *qRope != *kRope {
		return fmt.Errorf("the queries and keys are not rotated alike; attention.sdpa's rope rotates both")
	}
	s.rope = qRope
	k, kNorm := unnormalized(g, k)
	var kHeads, kDim int
	var qSplitNorm, kSplitNorm *match.RMSNorm      // Hugging Face's q_norm and k_norm, on (B, T, H, d)
	tokenQueries := s.rope != nil && s.rope.tokens // rotated before their Transpose: sdpa_rope_gptj_lift.go
	if tokenQueries {
		s.q, s.heads, s.dim, err = projectedTokenHeads(g, q, "queries")
	} else {
		s.q, s.heads, s.dim, qSplitNorm, err = projectedNormedHeads(g, q, "queries")
	}
	if err != nil {
		return err
	}
	if tokenQueries || tokenKeys {
		s.k, kHeads, kDim, err = projectedTokenHeads(g, k, "keys")
	} else {
		s.k, kHeads, kDim, kSplitNorm, err = projectedNormedHeads(g, k, "keys")
	}
	if err != nil {
		return err
	}
	if qNorm == nil && kNorm == nil {
		qNorm, kNorm = qSplitNorm, kSplitNorm
	} else if qSplitNorm != nil || kSplitNorm != nil {
		return fmt.Errorf("the queries or keys are normalized per head twice; attention.sdpa's qk_norm normalizes them once")
	}
	if (qNorm == nil) != (kNorm == nil) {
		return fmt.Errorf("only one of the queries and keys is normalized per head; attention.sdpa's qk_norm normalizes both")
	}
	s.qNorm, s.kNorm = qNorm, kNorm
	if kDim != s.dim || (kvHeads != 0 && kvHeads != kHeads) {
		return fmt.Errorf("the keys have %d heads of %d, the queries %d heads of %d", kHeads, kDim, s.heads, s.dim)
	}
	s.kvHeads = kHeads
	return nil
}

// layer reads the values and the output projection from the product of
// the weights and the values, and returns the layer.
func (s *sdpaScores) layer(g match.Graph, w *sdpaWeights) (*match.Layer, error) {
	v, kvHeads, err := unrepeated(g, w.product.Inputs()[1])
	if err != nil {
		return nil, err
	}
	vl, vHeads, vDim, err := projectedHeads(g, v, "values")
	if err != nil {
		return nil, err
	}
	switch {
	case vHeads != s.kvHeads || vDim != s.dim || (kvHeads != 0 && kvHeads != vHeads):
		return nil, fmt.Errorf("the values have %d heads of %d, the keys %d of %d", vHeads, vDim, s.kvHeads, s.dim)
	case s.heads%s.kvHeads != 0:
		return nil, fmt.Errorf("%d query heads over %d KV heads", s.heads, s.kvHeads)
	case s.k.Input != vl.Input:
		return nil, fmt.Errorf("keys and values are projected from %q and %q; attention.sdpa projects both from one input", s.k.Input, vl.Input)
	case (s.q.Bias != nil) != (s.k.Bias != nil) || (s.k.Bias != nil) != (vl.Bias != nil):
		return nil, fmt.Errorf("some of the q, k and v projections have a bias and some do not; attention.sdpa's qkv_bias is all or none")
	case w.sinks != nil && w.sinks.Shape().TotalSize() != s.heads:
		return nil, fmt.Errorf("%d sink logits for %d heads", w.sinks.Shape().TotalSize(), s.heads)
	}
	out, err := mergedOutput(g, w.product, s.heads*s.dim)
	if err != nil {
		return nil, err
	}
	_, _, width, ok := match.Tokens(mustShape(g, s.q.Input))
	if !ok || out.Out != width {
		return nil, fmt.Errorf("the output projection gives %d features for tokens of %d; attention.sdpa's output has the width of x", out.Out, width)
	}
	outName := "out_proj"
	if slices.ContainsFunc(append(g.Sources(out.WeightFrom), out.WeightFrom), func(v string) bool { return strings.HasSuffix(v, "o_proj.weight") }) {
		outName = "o_proj" // Hugging Face's name survives the round trip
	}
	cfg := []match.Field{{Key: "d", Value: width}}
	inputs := []string{s.q.Input}
	if s.k.Input != s.q.Input { // cross-attention
		inputs = append(inputs, s.k.Input)
		if s.k.In != width {
			cfg = append(cfg, match.Field{Key: "d_memory", Value: s.k.In})
		}
	}
	cfg = append(cfg, match.Field{Key: "num_heads", Value: s.heads})
	if s.kvHeads != s.heads {
		cfg = append(cfg, match.Field{Key: "num_kv_heads", Value: s.kvHeads})
	}
	if s.heads*s.dim != width {
		cfg = append(cfg, match.Field{Key: "head_dim", Value: s.dim})
	}
	cfg = append(cfg, match.Field{Key: "qkv_bias", Value: s.q.Bias != nil}, match.Field{Key: "out_bias", Value: out.Bias != nil})
	if outName != "out_proj" {
		cfg = append(cfg, match.Field{Key: "out_name", Value: outName})
	}
	cfg = append(cfg, match.Field{Key: "causal", Value: s.causal})
	if s.causal && s.topLeft {
		cfg = append(cfg, match.Field{Key: "causal_align", Value: "top_left"})
	}
	if s.window > 0 {
		cfg = append(cfg, match.Field{Key: "window", Value: s.window})
	}
	if s.alibi {
		cfg = append(cfg, match.Field{Key: "alibi", Value: true})
	}
	if s.mask != "" {
		inputs = append(inputs, s.maskInput)
		cfg = append(cfg, match.Field{Key: "mask", Value: s.mask})
		if s.mask == "bool" {
			cfg = append(cfg, match.Field{Key: "mask_polarity", Value: s.maskPolarity})
		}
		if !w.zeroes { // a query the mask hides from every key keeps the softmax's NaN
			cfg = append(cfg, match.Field{Key: "masked_rows", Value: "nan"})
		}
	}
	if !scaledAs(s.scale, s.dim) {
		cfg = append(cfg, match.Field{Key: "scale", Value: float32(s.scale)})
	}
	if s.softcap > 0 {
		cfg = append(cfg, match.Field{Key: "softcap", Value: float32(s.softcap)})
	}
	var notes []string
	if r := s.rope; r != nil {
		cfg = append(cfg, match.Field{Key: "rope", Value: r.style})
		if r.base != 10000 {
			cfg = append(cfg, match.Field{Key: "rope_base", Value: r.base})
		}
		if r.dim != s.dim {
			cfg = append(cfg, match.Field{Key: "rope_rotary_dim", Value: r.dim})
		}
		if r.note != "" {
			notes = append(notes, r.note)
		}
	}
	params := slices.Concat(s.q.Params("q_proj"), s.k.Params("k_proj"), vl.Params("v_proj"), out.Params(outName))
	if s.qNorm != nil {
		kind, err := qkNormKind(s.qNorm, s.kNorm, s.heads, s.kvHeads, s.dim)
		if err != nil {
			return nil, err
		}
		cfg = append(cfg, match.Field{Key: "qk_norm", Value: kind}, match.Field{Key: "qk_norm_eps", Value: s.qNorm.Eps})
		params = append(params, match.Param{Name: "q_norm.weight", Value: s.qNorm.Weight, From: s.qNorm.WeightFrom},
			match.Param{Name: "k_norm.weight", Value: s.kNorm.Weight, From: s.kNorm.WeightFrom})
	}
	if w.sinks != nil {
		cfg = append(cfg, match.Field{Key: "sinks", Value: true})
		params = append(params, match.Param{Name: "sinks", Value: w.sinks, From: w.sinksFrom})
	}
	if len(s.mods) > 0 {
		mods, err := NewScoreMods(s.modTypes, s.mods)
		if err != nil {
			return nil, err
		}
		cfg = append(cfg, match.Field{Key: "score_mod", Value: mods})
		for i, ps := range s.modParams {
			for _, p := range ps { // score_mod.bias, or score_mod.<i>.bias in a list
				p.Name = mods.where(i) + "." + p.Name
				params = append(params, p)
			}
		}
	}
	l := &match.Layer{Type: "attention.sdpa", Name: "attn", Config: cfg, Inputs: inputs, Output: out.Output, Params: params, Notes: notes}
	if s.keepInput != "" {
		if !g.Registered("mask.padding") {
			return nil, fmt.Errorf("the scores are masked from the keep mask %q and no layer type mask.padding is registered in this build", s.keepInput)
		}
		l.Before = []*match.Layer{{Type: "mask.padding", Name: "mask", Inputs: []string{s.keepInput}, Output: s.maskInput, KeepMasks: []string{s.keepInput}}}
	}
	return l, nil
}

// qkNormKind reads what attention.sdpa's qk_norm is for the RMSNorms of
// the queries and keys: "rms" when they normalize each head,
// "rms_projection" when they normalize the whole projections.
func qkNormKind(q, k *match.RMSNorm, heads, kvHeads, headDim int) (string, error) {
	switch {
	case q.Eps != k.Eps:
		return "", fmt.Errorf("the queries' and keys' RMSNorms have epsilons %v and %v: attention.sdpa's qk_norm has one", q.Eps, k.Eps)
	case q.Width == headDim && k.Width == headDim:
		return "rms", nil
	case q.Width == heads*headDim && k.Width == kvHeads*headDim:
		return "rms_projection", nil
	}
	return "", fmt.Errorf("the queries and keys are normalized over %d and %d features: attention.sdpa's qk_norm normalizes heads of %d (rms) or whole projections of %d and %d (rms_projection)",
		q.Width, k.Width, headDim, heads*headDim, kvHeads*headDim)
}

// unrotatedKeys follows the transposed keys kt of the product of queries
// and keys back through their repetition for grouped-query attention and
// their rotation. It returns the keys, their number of KV heads when
// repeated, the rotation, and whether the keys are (B, T, H, d) heads
// transposed to (B, H, d, T) at once (Transpose 0, 2, 3, 1, as T5's
// transpose(1, 2).transpose(3, 2) exports), which are neither repeated
// nor rotated.
func unrotatedKeys(g match.Graph, product *match.Node, kt string) (string, int, *sdpaRope, bool, error) {
	if n := g.Producer(kt); n != nil && n.Op() == "Transpose" && slices.Equal(n.Ints("perm"), []int64{0, 2, 3, 1}) {
		return n.Inputs()[0], 0, nil, true, nil
	}
	keys, ok := untransposedHeads(g, kt)
	if !ok {
		return "", 0, nil, false, fmt.Errorf("the keys of %s are not transposed heads", product.Name())
	}
	k, kvHeads, err := unrepeated(g, keys)
	if err != nil {
		return "", 0, nil, false, err
	}
	k, kRope, err := unrotated(g, k)
	return k, kvHeads, kRope, false, err
}

// untransposedHeads returns the (B, H, S, d) heads that v holds
// transposed to (B, H, d, S): by Transpose(perm 0, 1, 3, 2), or as the
// dynamo exporter writes it before opset 23, the heads reshaped to
// (B·H, S, d), transposed (0, 2, 1) and reshaped back.
func untransposedHeads(g match.Graph, v string) (string, bool) {
	n := g.Producer(v)
	if n != nil && n.Op() == "Transpose" && slices.Equal(n.Ints("perm"), []int64{0, 1, 3, 2}) {
		return n.Inputs()[0], true
	}
	if n == nil || n.Op() != "Reshape" {
		return "", false
	}
	t := g.Producer(n.Inputs()[0])
	if t == nil || t.Op() != "Transpose" || !slices.Equal(t.Ints("perm"), []int64{0, 2, 1}) {
		return "", false
	}
	r := g.Producer(t.Inputs()[0])
	if r == nil || r.Op() != "Reshape" {
		return "", false
	}
	x := r.Inputs()[0]
	for i := range g.Probes() {
		xs, err1 := g.ShapeAt(i, x)
		vs, err2 := g.ShapeAt(i, v)
		if err1 != nil || err2 != nil || len(xs) != 4 || !slices.Equal(vs, []int{xs[0], xs[1], xs[3], xs[2]}) {
			return "", false
		}
	}
	return x, true
}

// unnormalized returns the values an RMSNorm computes v from, written out
// (match.RMSNorm) or as ONNX's RMSNormalization op, and the norm; v itself
// and nil when no RMSNorm computes it.
func unnormalized(g match.Graph, v string) (string, *match.RMSNorm) {
	if n := g.Producer(throughCopies(g, v)); n != nil {
		if r, _ := match.MatchRMSNormalization(g, n); r != nil { // ONNX's op (opset 23)
			return throughCopies(g, r.Input), r
		}
	}
	mul := g.Producer(v)
	if mul == nil || mul.Op() != "Mul" {
		return v, nil
	}
	// The norm's input is a few steps back from its output (x / rms · w,
	// or x · (1 / rms) · w after a float32 copy): look for its Pow there.
	values := []string{v}
	for depth := 0; depth < 4 && len(values) > 0; depth++ {
		var next []string
		for _, u := range values {
			n := g.Producer(u)
			if n == nil {
				continue
			}
			for _, x := range n.Inputs() {
				if !g.IsData(x) {
					continue
				}
				for _, pow := range g.Readers(x) {
					if pow.Op() != "Pow" {
						continue
					}
					if r, err := match.MatchRMSNorm(g, pow); err == nil && r != nil && r.Output == v {
						return throughCopies(g, r.Input), r // Hugging Face's norms compute in float32
					}
				}
				next = append(next, x)
			}
		}
		values = next
	}
	return v, nil
}

// unrepeated returns the KV heads that grouped-query attention repeats
// into v (Unsqueeze on axis 2, Expand, Reshape) and their number; v itself
// and 0 when v is not repeated.
func unrepeated(g match.Graph, v string) (string, int, error) {
	reshape := g.Producer(v)
	if reshape == nil || reshape.Op() != "Reshape" {
		return v, 0, nil
	}
	expand := g.Producer(reshape.Inputs()[0])
	if expand == nil || expand.Op() != "Expand" {
		return v, 0, nil
	}
	unsq := g.Producer(expand.Inputs()[0])
	if unsq == nil || unsq.Op() != "Unsqueeze" {
		return v, 0, nil
	}
	axes, ok := g.Scalar(unsq.Inputs()[1])
	in, err := g.Shape(unsq.Inputs()[0])
	if !ok || axes != 2 || err != nil || len(in) != 4 {
		return "", 0, fmt.Errorf("heads %q are repeated in a way grouped-query attention does not repeat them", v)
	}
	return unsq.Inputs()[0], in[1], nil
}

// projectedHeads reads heads (B, H, T, d) split from a projection: the
// Transpose (0, 2, 1, 3) of a Reshape (B, T, H, d) of an nn.Linear.
func projectedHeads(g match.Graph, heads, what string) (*match.Linear, int, int, error) {
	l, h, d, norm, err := projectedNormedHeads(g, heads, what)
	if err == nil && norm != nil {
		err = fmt.Errorf("the %s are normalized per head, which this layer does not do", what)
	}
	return l, h, d, err
}

// projectedNormedHeads is projectedHeads that also reads an RMSNorm of
// each head between the split and the Transpose, as Qwen3 applies q_norm
// and k_norm, or of the whole projection before the split, as OLMo-2
// does: it returns the norm (its Width tells which), or nil.
func projectedNormedHeads(g match.Graph, heads, what string) (*match.Linear, int, int, *match.RMSNorm, error) {
	if l, h, d, ok := packedHeads(g, throughCopies(g, heads)); ok {
		return l, h, d, nil, nil
	}
	if l, h, d, ok := viewedHeads(g, throughCopies(g, heads)); ok {
		return l, h, d, nil, nil
	}
	tr := g.Producer(throughCopies(g, heads))
	if tr == nil || tr.Op() != "Transpose" || !slices.Equal(tr.Ints("perm"), []int64{0, 2, 1, 3}) {
		return nil, 0, 0, nil, fmt.Errorf("the %s (%q) are not heads split from a projection (rope is not lifted from standard ops)", what, heads)
	}
	split, norm := unnormalized(g, tr.Inputs()[0])
	reshape := g.Producer(split)
	if reshape == nil || reshape.Op() != "Reshape" {
		return nil, 0, 0, nil, fmt.Errorf("the %s (%q) are not heads split from a projection", what, heads)
	}
	shape, err := g.Shape(reshape.Output())
	if err != nil || len(shape) != 4 {
		return nil, 0, 0, nil, fmt.Errorf("the %s are split into heads of shape %v, not (B, T, H, d)", what, shape)
	}
	projected := reshape.Inputs()[0]
	if x, whole := unnormalized(g, throughCopies(g, projected)); whole != nil {
		if norm != nil {
			return nil, 0, 0, nil, fmt.Errorf("the %s are normalized both whole and per head; attention.sdpa's qk_norm normalizes them once", what)
		}
		projected, norm = x, whole
	}
	l, ok := g.Linear(projected)
	if !ok {
		return nil, 0, 0, nil, fmt.Errorf("the %s (%q) are not an nn.Linear of the input", what, projected)
	}
	if l.Out != shape[2]*shape[3] {
		return nil, 0, 0, nil, fmt.Errorf("the %s' projection gives %d features, split into %d heads of %d", what, l.Out, shape[2], shape[3])
	}
	return l, shape[2], shape[3], norm, nil
}

// packedHeads reads heads (B, H, T, d) sliced from heads of a packed
// projection, as GPT-NeoX splits query_key_value: each head's features
// packed side by side, view (B, T, H, k·d), Transpose (0, 2, 1, 3), and
// a Slice of d features of the last axis, or an output of a Split of it
// (the dynamo exporter's chunk). The projection returned holds the sliced
// rows of every head, in head order.
func packedHeads(g match.Graph, heads string) (*match.Linear, int, int, bool) {
	src, start, ok := lastAxisPart(g, heads)
	if !ok {
		return nil, 0, 0, false
	}
	l, H, W, ok := projectedPacked(g, src)
	shape, err := g.Shape(heads)
	if !ok || err != nil || len(shape) != 4 || start+shape[3] > W {
		return nil, 0, 0, false
	}
	d := shape[3]
	var rows []int
	var blocks [][2]int
	for h := range H {
		lo := h*W + start
		blocks = append(blocks, [2]int{lo, lo + d})
		for j := range d {
			rows = append(rows, lo+j)
		}
	}
	sub, err := linearRows(l, rows)
	if err != nil || l.Blocks != nil {
		return nil, 0, 0, false
	}
	sub.Blocks = blocks
	return sub, H, d, true
}

// lastAxisPart reads v as consecutive features of the last axis of a 4-D
// value: a Slice with step 1 from a non-negative start, or an output of a
// Split on that axis. It returns the value and the first feature.
func lastAxisPart(g match.Graph, v string) (string, int, bool) {
	n := g.Producer(v)
	switch {
	case n == nil:
		return "", 0, false
	case n.Op() == "Slice" && len(n.Inputs()) >= 4 && len(n.Inputs()) <= 5:
		ins := n.Inputs()
		start, ok1 := g.Scalar(ins[1])
		axis, ok2 := g.Scalar(ins[3])
		if len(ins) == 5 {
			if step, ok := g.Scalar(ins[4]); !ok || step != 1 {
				return "", 0, false
			}
		}
		if !ok1 || !ok2 || axis != -1 && axis != 3 || start < 0 {
			return "", 0, false
		}
		return ins[0], int(start), true
	case n.Op() == "Split":
		src := n.Inputs()[0]
		shape, err := g.Shape(src)
		if axis := n.Int("axis", 0); err != nil || len(shape) != 4 || axis != -1 && axis != 3 {
			return "", 0, false
		}
		start := 0
		for _, o := range n.Outputs() {
			if o == v {
				return src, start, true
			}
			os, err := g.Shape(o)
			if err != nil || len(os) != 4 {
				return "", 0, false
			}
			start += os[3]
		}
	}
	return "", 0, false
}

// projectedPacked reads the Transpose (0, 2, 1, 3) of a Reshape (B, T, H,
// W) of an nn.Linear of H·W features, and returns it with H and W.
func projectedPacked(g match.Graph, v string) (*match.Linear, int, int, bool) {
	tr := g.Producer(v)
	if tr == nil || tr.Op() != "Transpose" || !slices.Equal(tr.Ints("perm"), []int64{0, 2, 1, 3}) {
		return nil, 0, 0, false
	}
	reshape := g.Producer(tr.Inputs()[0])
	if reshape == nil || reshape.Op() != "Reshape" {
		return nil, 0, 0, false
	}
	shape, err := g.Shape(reshape.Output())
	if err != nil || len(shape) != 4 {
		return nil, 0, 0, false
	}
	l, ok := g.Linear(reshape.Inputs()[0])
	if !ok || l.Out != shape[2]*shape[3] {
		return nil, 0, 0, false
	}
	return l, shape[2], shape[3], true
}

// linearRows is the nn.Linear computing the given output features of l,
// in that order.
func linearRows(l *match.Linear, rows []int) (*match.Linear, error) {
	wt, err := match.Float32(l.Weight)
	if err != nil {
		return nil, err
	}
	w := floats(wt)
	weight := make([]float32, 0, len(rows)*l.In)
	for _, r := range rows {
		weight = append(weight, w[r*l.In:(r+1)*l.In]...)
	}
	sub := *l
	sub.Out = len(rows)
	sub.Weight = tensor.New(tensor.WithShape(len(rows), l.In), tensor.WithBacking(weight))
	if l.Bias != nil {
		bt, err := match.Float32(l.Bias)
		if err != nil {
			return nil, err
		}
		b := floats(bt)
		bias := make([]float32, len(rows))
		for i, r := range rows {
			bias[i] = b[r]
		}
		sub.Bias = tensor.New(tensor.WithShape(len(rows)), tensor.WithBacking(bias))
	}
	return &sub, nil
}

// mergedOutput reads the output projection of the heads pv computes:
// Transpose (0, 2, 1, 3), Reshape to (B, T, width), nn.Linear.
func mergedOutput(g match.Graph, pv *match.Node, width int) (*match.Linear, error) {
	tr := match.OnlyReader(g, pv.Output())
	if tr != nil && tr.Op() == "Reshape" && sameShapes(g, pv.Output(), tr.Output()) { // a view to the shape it has (TorchScript's GQA)
		tr = match.OnlyReader(g, tr.Output())
	}
	if tr == nil || tr.Op() != "Transpose" || !slices.Equal(tr.Ints("perm"), []int64{0, 2, 1, 3}) {
		return nil, fmt.Errorf("the heads of %s are not merged (Transpose, Reshape)", pv.Name())
	}
	reshape := match.OnlyReader(g, tr.Output())
	if reshape == nil || reshape.Op() != "Reshape" {
		return nil, fmt.Errorf("the heads of %s are not merged (Transpose, Reshape)", pv.Name())
	}
	return outProjection(g, reshape.Output(), width)
}

// outProjection reads the output projection, an nn.Linear of width
// features, that reads merged.
func outProjection(g match.Graph, merged string, width int) (*match.Linear, error) {
	mm := match.OnlyReader(g, merged)
	if mm == nil {
		return nil, fmt.Errorf("no output projection reads the merged heads (attention.sdpa has out_proj)")
	}
	candidates := []string{mm.Output()}
	if add := match.OnlyReader(g, mm.Output()); add != nil && add.Op() == "Add" {
		candidates = []string{add.Output(), mm.Output()}
	}
	for _, c := range candidates {
		if l, ok := g.Linear(c); ok && l.Input == merged && l.In == width {
			return l, nil
		}
	}
	return nil, fmt.Errorf("no output projection of %d features reads the merged heads (attention.sdpa has out_proj)", width)
}

// sameShapes reports whether values a and b have the same shape at every
// probe.
func sameShapes(g match.Graph, a, b string) bool {
	for i := range g.Probes() {
		as, err1 := g.ShapeAt(i, a)
		bs, err2 := g.ShapeAt(i, b)
		if err1 != nil || err2 != nil || !slices.Equal(as, bs) {
			return false
		}
	}
	return true
}

// mustShape is a value's shape, nil when unknown.
func mustShape(g match.Graph, v string) []int {
	s, _ := g.Shape(v)
	return s
}

// sdpaRope is attention.sdpa's rotation of queries and keys.
type sdpaRope struct {
	style string
	base  float64
	dim   int
	note  string
	// tokens: the rotated heads are (B, T, H, d), before their Transpose
	// (GPT-J, sdpa_rope_gptj_lift.go).
	tokens bool
}

// unrotated returns the heads that RoPE, as rotateONNX writes it, rotates
// into v, and the rotation; v itself and nil when v is not rotated. A
// partial rotation joins the rotated first dim features and the rest of
// the heads (a Slice) by Concat; the rotation itself is the Concat of
// (a·cos − b·sin, b·cos + a·sin) of the halves, or of the pairs reshaped
// back (interleaved).
func unrotated(g match.Graph, v string) (string, *sdpaRope, error) {
	if x, r, err := unrotatedEveryTwo(g, v); r != nil || err != nil { // sdpa_rope_gptj_lift.go: GPT-J's form
		return x, r, err
	}
	if x, r, err := unrotatedHalf(g, v); r != nil || err != nil { // sdpa_rope_hf_lift.go: Hugging Face's form
		return x, r, err
	}
	if x, r, err := unrotatedPartialHalf(g, v); r != nil || err != nil { // sdpa_rope_hf_lift.go: GPT-NeoX's rotary_pct
		return x, r, err
	}
	if x, r, err := unrotatedOp(g, v); r != nil || err != nil { // sdpa_rope_hf_lift.go: ONNX's RotaryEmbedding
		return x, r, err
	}
	n := g.Producer(v)
	if n == nil || (n.Op() != "Concat" && n.Op() != "Reshape") {
		return v, nil, nil
	}
	rotated, whole := v, ""
	if ins := n.Inputs(); n.Op() == "Concat" && len(ins) == 2 {
		if rest := g.Producer(ins[1]); rest != nil && rest.Op() == "Slice" {
			rotated, whole = ins[0], rest.Inputs()[0]
		}
	}
	join := g.Producer(rotated)
	if join != nil && join.Op() == "Reshape" {
		join = g.Producer(join.Inputs()[0])
	}
	if join == nil || join.Op() != "Concat" || len(join.Inputs()) != 2 {
		return v, nil, nil
	}
	sub := g.Producer(join.Inputs()[0])
	if sub == nil || sub.Op() != "Sub" {
		return v, nil, nil
	}
	aCos := g.Producer(sub.Inputs()[0])
	if aCos == nil || aCos.Op() != "Mul" {
		return v, nil, nil
	}
	a, _, ok := dataAndStatic(g, aCos)
	if !ok {
		return v, nil, nil
	}
	src, err := sliceSource(g, a)
	if err != nil {
		return v, nil, nil
	}
	if pairs := g.Producer(src); pairs != nil && pairs.Op() == "Reshape" && g.Producer(rotated).Op() == "Reshape" {
		src = pairs.Inputs()[0]
	}
	shape, err := g.Shape(src)
	if err != nil || len(shape) != 4 {
		return "", nil, fmt.Errorf("the rotated heads %q are not (B, H, T, rotary_dim)", src)
	}
	r := &sdpaRope{dim: shape[3]}
	if whole != "" {
		if from, err := sliceSource(g, src); err != nil || from != whole {
			return "", nil, fmt.Errorf("the partial rotation of %q joins other heads than it rotates", v)
		}
		src = whole
	}
	if r.style, r.base, r.note, err = readMLARope(g, rotated, r.dim); err != nil {
		return "", nil, err
	}
	return src, r, nil
}
