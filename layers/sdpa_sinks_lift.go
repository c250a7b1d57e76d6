package layers

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// attention.sdpa with sinks in ONNX graphs. Sinks have no ONNX op, so
// ExportONNX writes such a layer out of standard ops at every opset
// (exportDecomposed), and the attention recognizer, which wants a Softmax
// over query-key scores, declines its softmax over scores with one more
// column. This pattern reads that form by structure:
//
//	q = split(x W_qᵀ) [qk_norm]      k, v = split(x W_kᵀ), split(x W_vᵀ) [qk_norm on k] [repeated for GQA]
//	w = Slice(Softmax(Concat(scale · q kᵀ [causal −Inf], Expand(sinks))), drop the last column)
//	y = merge(w v) W_oᵀ + b_o
//
// where split is Reshape (B, T, H, d) then Transpose to (B, H, T, d) and
// merge the reverse. What the layer adds to the scores besides scale and
// the causal mask (rope, score_mod, masks) it refuses, naming it. The
// lifter builds the layer and runs it against the graph before accepting
// it.

func init() {
	match.RegisterPattern(match.Pattern{Name: "attention.sdpa/sinks", Op: "Softmax", Match: liftSDPASinks})
}

// liftSDPASinks is the pattern's Match: nil, nil until the softmax is seen
// to have a column of sink logits.
func liftSDPASinks(g match.Graph, softmax *match.Node) (*match.Layer, error) {
	concat := g.Producer(softmax.Inputs()[0])
	if concat == nil || concat.Op() != "Concat" || len(concat.Inputs()) != 2 || !lastAxis(g, softmax) || !lastAxis(g, concat) {
		return nil, nil
	}
	scores, column := concat.Inputs()[0], concat.Inputs()[1]
	if !g.IsData(scores) || g.IsData(column) {
		return nil, nil
	}
	weights := match.OnlyReader(g, softmax.Output())
	if weights == nil || !dropsLastColumn(g, weights) {
		return nil, nil
	}
	sinks, sinksFrom, err := readSinks(g, column)
	if err != nil {
		return nil, match.Refuse([]*match.Node{concat, softmax}, "softmax with a sink column: %v", err)
	}
	if !g.Registered("attention.sdpa") {
		return nil, match.Refuse([]*match.Node{softmax}, "softmax with sinks: no layer type attention.sdpa is registered in this build")
	}
	s, err := readSinkScores(g, scores)
	if err != nil {
		return nil, match.Refuse([]*match.Node{concat, softmax}, "attention with sinks: %v", err)
	}
	pv := match.OnlyReader(g, weights.Output())
	if pv == nil || pv.Op() != "MatMul" || pv.Inputs()[0] != weights.Output() {
		return nil, match.Refuse([]*match.Node{softmax, weights}, "attention with sinks: the weights are not multiplied by the values (a Where after the softmax: masked rows are not lifted)")
	}
	l, err := s.layer(g, pv, sinks, sinksFrom)
	if err != nil {
		return nil, match.Refuse([]*match.Node{softmax}, "attention with sinks: %v", err)
	}
	return l, nil
}

// sinkScores is what the walk from the scores back to the projections
// found.
type sinkScores struct {
	scale  float64
	causal bool
	// q and k are the query and key projections; qNorm and kNorm their
	// per-head RMSNorms (nil without qk_norm); groups the query heads per
	// KV head.
	q, k         *match.Linear
	qNorm, kNorm *match.RMSNorm
	heads, dim   int
	kvHeads      int
}

// readSinkScores follows the scores back through the scale and a causal
// mask to scale · q kᵀ, and q and k to their projections.
func readSinkScores(g match.Graph, scores string) (*sinkScores, error) {
	chain := match.WalkScores[*match.Node, string](scoresOf{g}, scores, match.Rules{})
	if chain.Stop != match.AtProduct {
		if chain.At != nil {
			return nil, fmt.Errorf("the scores pass through %s (%s), which attention.sdpa's lift from standard ops does not read (score_mod, softcap)", chain.At.Name(), chain.At.Op())
		}
		return nil, fmt.Errorf("no product of queries and keys computes the scores")
	}
	s := &sinkScores{scale: 1}
	for _, st := range chain.Steps {
		ins := st.Node.Inputs()
		switch st.Kind {
		case match.Scale:
			c, ok := g.Scalar(ins[st.Arg])
			if !ok {
				return nil, fmt.Errorf("the scores are scaled by %q, not a constant scalar", ins[st.Arg])
			}
			if st.OnDiv {
				c = 1 / c
			}
			s.scale *= c
		case match.Where:
			fill, ok := g.Scalar(ins[st.Fill])
			if s.causal || st.Keep || !ok || !math.IsInf(fill, -1) || !hidesFuture(g, ins[st.Arg]) {
				return nil, fmt.Errorf("the scores are masked by %s (%s), not by the causal mask alone", st.Node.Name(), st.Node.Op())
			}
			s.causal = true
		default:
			return nil, fmt.Errorf("the scores pass through %s (%s), which attention.sdpa's lift from standard ops does not read (a mask or score_mod)", st.Node.Name(), st.Node.Op())
		}
	}
	ins := chain.Product.Inputs()
	kT := g.Producer(ins[1])
	if kT == nil || kT.Op() != "Transpose" || !slices.Equal(kT.Ints("perm"), []int64{0, 1, 3, 2}) {
		return nil, fmt.Errorf("the keys of %s are not transposed heads", chain.Product.Name())
	}
	q, qNorm := unnormalized(g, ins[0])
	kRep, kNorm := kT.Inputs()[0], (*match.RMSNorm)(nil)
	k, kvHeads, err := unrepeated(g, kRep)
	if err != nil {
		return nil, err
	}
	k, kNorm = unnormalized(g, k)
	if (qNorm == nil) != (kNorm == nil) {
		return nil, fmt.Errorf("only one of the queries and keys is normalized per head; attention.sdpa's qk_norm normalizes both")
	}
	s.qNorm, s.kNorm = qNorm, kNorm
	var heads, kHeads int
	if s.q, heads, s.dim, err = projectedHeads(g, q, "queries"); err != nil {
		return nil, err
	}
	var kDim int
	if s.k, kHeads, kDim, err = projectedHeads(g, k, "keys"); err != nil {
		return nil, err
	}
	if kDim != s.dim || (kvHeads != 0 && kvHeads != kHeads) {
		return nil, fmt.Errorf("the keys have %d heads of %d, the queries %d heads of %d", kHeads, kDim, heads, s.dim)
	}
	s.heads, s.kvHeads = heads, kHeads
	return s, nil
}

// layer reads the values and the output projection from pv, the product
// of the weights and the values, and returns the layer.
func (s *sinkScores) layer(g match.Graph, pv *match.Node, sinks *tensor.Dense, sinksFrom string) (*match.Layer, error) {
	v, kvHeads, err := unrepeated(g, pv.Inputs()[1])
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
	case s.q.Input != s.k.Input || s.k.Input != vl.Input:
		return nil, fmt.Errorf("queries, keys and values are projected from %q, %q and %q; attention.sdpa's lift from standard ops reads self-attention", s.q.Input, s.k.Input, vl.Input)
	case (s.q.Bias != nil) != (s.k.Bias != nil) || (s.k.Bias != nil) != (vl.Bias != nil):
		return nil, fmt.Errorf("some of the q, k and v projections have a bias and some do not; attention.sdpa's qkv_bias is all or none")
	case sinks.Shape().TotalSize() != s.heads:
		return nil, fmt.Errorf("%d sink logits for %d heads", sinks.Shape().TotalSize(), s.heads)
	}
	out, err := mergedOutput(g, pv, s.heads*s.dim)
	if err != nil {
		return nil, err
	}
	_, _, width, ok := match.Tokens(mustShape(g, s.q.Input))
	if !ok || out.Out != width {
		return nil, fmt.Errorf("the output projection gives %d features for tokens of %d; attention.sdpa's output has the width of x", out.Out, width)
	}
	outName := "out_proj"
	if slices.ContainsFunc(append(g.Sources(out.WeightFrom), out.WeightFrom), func(v string) bool { return strings.HasSuffix(v, "o_proj.weight") }) {
		// Hugging Face's name survives the round trip
		outName = "o_proj"
	}
	cfg := []match.Field{{Key: "d", Value: width}, {Key: "num_heads", Value: s.heads}}
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
	if !scaledAs(s.scale, s.dim) {
		cfg = append(cfg, match.Field{Key: "scale", Value: float32(s.scale)})
	}
	params := slices.Concat(s.q.Params("q_proj"), s.k.Params("k_proj"), vl.Params("v_proj"), out.Params(outName))
	if s.qNorm != nil {
		if s.qNorm.Eps != s.kNorm.Eps {
			return nil, fmt.Errorf("the queries' and keys' RMSNorms have epsilons %v and %v: attention.sdpa's qk_norm has one", s.qNorm.Eps, s.kNorm.Eps)
		}
		cfg = append(cfg, match.Field{Key: "qk_norm", Value: "rms"}, match.Field{Key: "qk_norm_eps", Value: s.qNorm.Eps})
		params = append(params, match.Param{Name: "q_norm.weight", Value: s.qNorm.Weight, From: s.qNorm.WeightFrom},
			match.Param{Name: "k_norm.weight", Value: s.kNorm.Weight, From: s.kNorm.WeightFrom})
	}
	cfg = append(cfg, match.Field{Key: "sinks", Value: true})
	params = append(params, match.Param{Name: "sinks", Value: sinks, From: sinksFrom})
	return &match.Layer{Type: "attention.sdpa", Name: "attn", Config: cfg, Inputs: []string{s.q.Input}, Output: out.Output, Params: params}, nil
}

// scoresOf is a match.Graph as match.WalkScores walks it: through data
// values only.
type scoresOf struct{ g match.Graph }

func (v scoresOf) Producer(x string) (*match.Node, bool) {
	n := v.g.Producer(x)
	return n, n != nil
}
func (v scoresOf) Op(n *match.Node) string              { return n.Op() }
func (v scoresOf) Inputs(n *match.Node) []string        { return n.Inputs() }
func (v scoresOf) Follows(x string, _ *match.Node) bool { return v.g.IsData(x) }
func (v scoresOf) Carries(n *match.Node, k int) bool    { return v.g.IsData(n.Inputs()[k]) }

// lastAxis reports whether a Softmax or Concat works on the last axis of
// its (4-D) output.
func lastAxis(g match.Graph, n *match.Node) bool {
	shape, err := g.Shape(n.Output())
	if err != nil {
		return false
	}
	def := int64(-1)
	if n.Op() == "Softmax" && g.Opset() < 13 {
		def = 1
	}
	axis := n.Int("axis", def)
	return axis == -1 || axis == int64(len(shape)-1)
}

// dropsLastColumn reports whether n is a Slice that keeps all but the last
// element of the last axis.
func dropsLastColumn(g match.Graph, n *match.Node) bool {
	ins := n.Inputs()
	if n.Op() != "Slice" || len(ins) < 4 {
		return false
	}
	in, err1 := g.Shape(ins[0])
	out, err2 := g.Shape(n.Output())
	if err1 != nil || err2 != nil || len(in) != len(out) {
		return false
	}
	axis, ok := g.Scalar(ins[3])
	if !ok || (int(axis) != -1 && int(axis) != len(in)-1) {
		return false
	}
	last := len(in) - 1
	return out[last] == in[last]-1 && slices.Equal(in[:last], out[:last]) && startsAt0(g, ins[1])
}

// startsAt0 reports whether a Slice's starts is the constant 0.
func startsAt0(g match.Graph, v string) bool {
	s, ok := g.Scalar(v)
	return ok && s == 0
}

// readSinks reads the sink logits from the column (B, H, Tq, 1) the
// softmax gets besides the scores: one per head, the same for every batch
// and query.
func readSinks(g match.Graph, column string) (*tensor.Dense, string, error) {
	var sinks []float32
	for i := range g.Probes() {
		t, err := g.ValueAt(i, column)
		if err != nil {
			return nil, "", err
		}
		shape := t.Shape()
		if len(shape) != 4 || shape[3] != 1 {
			return nil, "", fmt.Errorf("the column %q has shape %v, not (B, H, Tq, 1)", column, shape)
		}
		vals, err := match.Floats(t)
		if err != nil {
			return nil, "", err
		}
		H, rows := shape[1], shape[2]
		if sinks == nil {
			sinks = make([]float32, H)
			for h := range sinks {
				sinks[h] = float32(vals[h*rows])
			}
		}
		for j, x := range vals {
			if h := j / rows % H; H != len(sinks) || float32(x) != sinks[h] {
				return nil, "", fmt.Errorf("the column %q is not one logit per head", column)
			}
		}
	}
	from := ""
	for _, src := range g.Sources(column) {
		c, err := g.Constant(src)
		if err != nil || c.Shape().TotalSize() != len(sinks) {
			continue
		}
		if vals, err := match.Floats(c); err == nil && slices.EqualFunc(vals, sinks, func(a float64, b float32) bool { return float32(a) == b }) {
			from = src
			break
		}
	}
	return tensor.New(tensor.WithShape(len(sinks)), tensor.WithBacking(sinks)), from, nil
}

// hidesFuture reports whether a static bool condition is true exactly
// where a key comes after its query, at every probe shape.
func hidesFuture(g match.Graph, cond string) bool {
	for i := range g.Probes() {
		t, err := g.ValueAt(i, cond)
		if err != nil {
			return false
		}
		hidden, ok := t.Data().([]bool)
		shape := t.Shape()
		if !ok || len(shape) < 2 || shape.TotalSize() != shape[len(shape)-2]*shape[len(shape)-1] {
			return false
		}
		rows, cols := shape[len(shape)-2], shape[len(shape)-1]
		for j, h := range hidden {
			if h != (j%cols > j/cols) || rows != cols {
				return false
			}
		}
	}
	return true
}

// unnormalized returns the heads a per-head RMSNorm computes v from, and
// the norm; v itself and nil when no RMSNorm computes it.
func unnormalized(g match.Graph, v string) (string, *match.RMSNorm) {
	mul := g.Producer(v)
	if mul == nil || mul.Op() != "Mul" {
		return v, nil
	}
	for _, in := range mul.Inputs() {
		div := g.Producer(in)
		if div == nil || div.Op() != "Div" {
			continue
		}
		x := div.Inputs()[0]
		for _, pow := range g.Readers(x) {
			if pow.Op() != "Pow" {
				continue
			}
			if r, err := match.MatchRMSNorm(g, pow); err == nil && r != nil && r.Output == v {
				return x, r
			}
		}
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
	tr := g.Producer(heads)
	if tr == nil || tr.Op() != "Transpose" || !slices.Equal(tr.Ints("perm"), []int64{0, 2, 1, 3}) {
		return nil, 0, 0, fmt.Errorf("the %s (%q) are not heads split from a projection (rope is not lifted from standard ops)", what, heads)
	}
	reshape := g.Producer(tr.Inputs()[0])
	if reshape == nil || reshape.Op() != "Reshape" {
		return nil, 0, 0, fmt.Errorf("the %s (%q) are not heads split from a projection", what, heads)
	}
	shape, err := g.Shape(reshape.Output())
	if err != nil || len(shape) != 4 {
		return nil, 0, 0, fmt.Errorf("the %s are split into heads of shape %v, not (B, T, H, d)", what, shape)
	}
	l, ok := g.Linear(reshape.Inputs()[0])
	if !ok {
		return nil, 0, 0, fmt.Errorf("the %s (%q) are not an nn.Linear of the input", what, reshape.Inputs()[0])
	}
	if l.Out != shape[2]*shape[3] {
		return nil, 0, 0, fmt.Errorf("the %s' projection gives %d features, split into %d heads of %d", what, l.Out, shape[2], shape[3])
	}
	return l, shape[2], shape[3], nil
}

// mergedOutput reads the output projection of the heads pv computes:
// Transpose (0, 2, 1, 3), Reshape to (B, T, width), nn.Linear.
func mergedOutput(g match.Graph, pv *match.Node, width int) (*match.Linear, error) {
	tr := match.OnlyReader(g, pv.Output())
	if tr == nil || tr.Op() != "Transpose" || !slices.Equal(tr.Ints("perm"), []int64{0, 2, 1, 3}) {
		return nil, fmt.Errorf("the heads of %s are not merged (Transpose, Reshape)", pv.Name())
	}
	reshape := match.OnlyReader(g, tr.Output())
	if reshape == nil || reshape.Op() != "Reshape" {
		return nil, fmt.Errorf("the heads of %s are not merged (Transpose, Reshape)", pv.Name())
	}
	merged := reshape.Output()
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

// mustShape is a value's shape, nil when unknown.
func mustShape(g match.Graph, v string) []int {
	s, _ := g.Shape(v)
	return s
}
