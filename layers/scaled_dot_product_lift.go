package layers

import (
	"fmt"
	"math"
	"slices"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// attention.scaled_dot_product in ONNX graphs: F.scaled_dot_product_attention
// on query, key and value that are graph inputs of rank 4, as PyTorch 2.x
// exports it. The TorchScript exporter and the dynamo exporter before
// opset 23 write it out, anchored here at the Softmax:
//
//	softmax(q·√s @ (kᵀ·√s) + mask) [Where(IsNaN(w), 0, w)] @ v
//
// √s on the queries and on the transposed keys (any scalar factors, on
// either side or on the scores, multiply into the scale); keys and values
// reach the products through layout nodes (Transpose, Reshape, and
// Unsqueeze, Expand, Reshape repeating them for grouped-query attention);
// the mask added to the scores is a static causal one (0, −Inf above the
// diagonal: is_causal), a float graph input (an additive mask), or
// Where(m, 0, fill) of a bool graph input m with a fill of −Inf or a
// number as low as finfo.min (a bool mask, True attends). The Where on
// IsNaN gives zeros to queries that see no key; without it they are NaN.
// From opset 23 the dynamo exporter writes ONNX's Attention op, anchored at
// it: 4-D inputs, is_causal, scale and the attn_mask input as they are.
// The layouts are checked by shapes here and by the lifter's run of the
// layer against the graph.

func init() {
	match.RegisterPattern(match.Pattern{Name: "attention.scaled_dot_product", Op: "Softmax", Match: liftScaledDotProduct})
	match.RegisterPattern(match.Pattern{Name: "attention.scaled_dot_product/op", Op: "Attention", Match: liftScaledDotProductOp})
}

// sdpaGraphInput is a graph input of rank 4 that a functional attention
// reads: (B, heads, tokens, head_dim).
func sdpaGraphInput(g match.Graph, v string) bool {
	if g.Producer(v) != nil || !g.IsData(v) {
		return false
	}
	shape, err := g.Shape(v)
	return err == nil && len(shape) == 4
}

// functionalSDPA is what the pattern read.
type functionalSDPA struct {
	q, k, v, mask string
	scale         float64 // the product of the scalar factors
	causal        bool
	maskKind      string // "", "bool" (True attends) or "additive"
	nanRows       bool
	output        string
	nodes         []*match.Node
	// err is why a structure on graph inputs cannot be lifted.
	err error
}

// liftScaledDotProduct matches the decomposition anchored at its Softmax.
func liftScaledDotProduct(g match.Graph, softmax *match.Node) (*match.Layer, error) {
	if !lastAxis(g, softmax) {
		return nil, nil
	}
	f := &functionalSDPA{scale: 1, nodes: []*match.Node{softmax}}
	product, ok := f.readScores(g, softmax.Inputs()[0])
	if !ok {
		return nil, nil
	}
	pv, ok := f.readWeights(g, softmax.Output())
	if !ok {
		return nil, nil
	}
	var qScale, kScale float64
	if f.q, qScale, ok = layoutSource(g, product.Inputs()[0]); !ok {
		return nil, nil
	}
	if f.k, kScale, ok = layoutSource(g, product.Inputs()[1]); !ok {
		return nil, nil
	}
	var vScale float64
	if f.v, vScale, ok = layoutSource(g, pv.Inputs()[1]); !ok || vScale != 1 {
		return nil, nil
	}
	// Queries, keys and values are graph inputs: the structure is this
	// pattern's, so what it cannot read is refused rather than declined.
	if f.err != nil {
		return nil, match.Refuse(f.nodes, "F.scaled_dot_product_attention on graph inputs: %v", f.err)
	}
	f.scale *= qScale * kScale
	f.output = pv.Output()
	if err := f.checkShapes(g, product, pv); err != nil {
		return nil, match.Refuse(f.nodes, "F.scaled_dot_product_attention on graph inputs: %v", err)
	}
	return f.layer(g)
}

// readScores walks back from the softmax's input to the product of queries
// and keys through scalar factors and masks added to the scores. A mask it
// cannot read is recorded in f.err, and the walk goes on: whether the
// structure is this pattern's is known only at the queries and keys.
func (f *functionalSDPA) readScores(g match.Graph, v string) (*match.Node, bool) {
	for {
		n := g.Producer(v)
		if n == nil {
			return nil, false
		}
		f.nodes = append(f.nodes, n)
		if c, x, ok := scalarFactor(g, n); ok {
			f.scale *= c
			v = x
			continue
		}
		switch n.Op() {
		case "MatMul":
			ins := n.Inputs()
			return n, g.IsData(ins[0]) && g.IsData(ins[1])
		case "Add":
			ins := n.Inputs()
			k := slices.IndexFunc(ins, func(x string) bool { return f.isMask(g, x) })
			if k < 0 {
				return nil, false
			}
			if err := f.readMask(g, n, ins[k]); err != nil && f.err == nil {
				f.err = err
			}
			v = ins[1-k]
		default:
			return nil, false
		}
	}
}

// isMask reports whether x, added to the scores, is a mask: static, a
// float graph input, or a Where of a bool graph input.
func (f *functionalSDPA) isMask(g match.Graph, x string) bool {
	if !g.IsData(x) {
		return true
	}
	if g.Producer(x) == nil {
		return true
	}
	w := g.Producer(x)
	return w.Op() == "Where" && g.Producer(w.Inputs()[0]) == nil && g.IsData(w.Inputs()[0])
}

// readMask reads a mask added to the scores by node add.
func (f *functionalSDPA) readMask(g match.Graph, add *match.Node, x string) error {
	switch {
	case !g.IsData(x):
		causal, err := staticCausalMask(g, x, add.Output())
		if err != nil {
			return err
		}
		f.causal = f.causal || causal
		return nil
	case f.mask != "":
		return fmt.Errorf("the scores are masked by two graph inputs (%s and %s)", f.mask, x)
	case g.Producer(x) == nil:
		f.mask, f.maskKind = x, "additive"
		return nil
	}
	where := g.Producer(x)
	ins := where.Inputs()
	zero, okZero := g.Scalar(ins[1])
	fill, okFill := g.Scalar(ins[2])
	if t, err := g.ValueAt(0, ins[0]); err != nil || t.Dtype() != tensor.Bool || !okZero || zero != 0 || !okFill || !hidesScore(fill) {
		return fmt.Errorf("the mask %s is not Where(bool mask, 0, -inf) of a graph input", where.Name())
	}
	f.nodes = append(f.nodes, where)
	f.mask, f.maskKind = ins[0], "bool"
	return nil
}

// hidesScore reports whether adding fill to a score hides its key: −Inf,
// or a number as low as float32's lowest (finfo.min, which the dynamo
// exporter writes), next to which every score's weight is 0.
func hidesScore(fill float64) bool { return fill <= -1e30 }

// staticCausalMask reads a static mask added to scores of the given value: 0 on
// and below the diagonal and −Inf (or finfo.min) above it at every probe (a
// causal frontier aligned top-left, which leaves every query a key), or 0
// everywhere.
func staticCausalMask(g match.Graph, mask, scores string) (bool, error) {
	causal := false
	for i := range g.Probes() {
		shape, err := g.ShapeAt(i, scores)
		if err != nil {
			return false, err
		}
		t, err := g.ValueAt(i, mask)
		if err != nil {
			return false, err
		}
		values, err := match.Floats(t)
		if err != nil {
			return false, err
		}
		ms := []int(t.Shape())
		tq, tk := shape[len(shape)-2], shape[len(shape)-1]
		if len(ms) < 2 || ms[len(ms)-2] != tq || ms[len(ms)-1] != tk || len(values) != tq*tk {
			return false, fmt.Errorf("a static mask of shape %s added to scores %s: want (Tq, Tk)", fmtShape(ms), fmtShape(shape))
		}
		hides := false
		for r := range tq {
			for c := range tk {
				x := values[r*tk+c]
				switch {
				case c > r && hidesScore(x):
					hides = true
				case x != 0:
					return false, fmt.Errorf("a static mask added to the scores is not causal: query %d, key %d holds %g", r, c, x)
				}
			}
		}
		if i > 0 && hides != causal {
			return false, fmt.Errorf("the static mask is causal at one sequence length and not at another")
		}
		causal = hides
	}
	return causal, nil
}

// readWeights follows the softmax's weights to their product with the
// values, through Where(IsNaN(w), 0, w).
func (f *functionalSDPA) readWeights(g match.Graph, w string) (*match.Node, bool) {
	rs := g.Readers(w)
	f.nanRows = true
	if len(rs) == 2 {
		isNaN, where := rs[0], rs[1]
		if isNaN.Op() != "IsNaN" {
			isNaN, where = where, isNaN
		}
		ins := where.Inputs()
		zero, ok := g.Scalar(ins[1])
		if isNaN.Op() != "IsNaN" || where.Op() != "Where" || ins[0] != isNaN.Output() || ins[2] != w || !ok || zero != 0 {
			return nil, false
		}
		f.nodes = append(f.nodes, isNaN, where)
		f.nanRows = false
		w, rs = where.Output(), g.Readers(where.Output())
	}
	if len(rs) != 1 || rs[0].Op() != "MatMul" || rs[0].Inputs()[0] != w {
		return nil, false
	}
	f.nodes = append(f.nodes, rs[0])
	return rs[0], true
}

// layoutNodes are the ops that move elements without computing: the
// exporters' transposes, head regroupings and GQA's repeat.
var layoutNodes = map[string]bool{"Transpose": true, "Reshape": true, "Unsqueeze": true, "Squeeze": true, "Expand": true, "Identity": true}

// layoutSource follows v back through layout nodes and scalar factors to
// a rank-4 graph input and returns it with the product of the factors.
func layoutSource(g match.Graph, v string) (string, float64, bool) {
	scale := 1.0
	for {
		if sdpaGraphInput(g, v) {
			return v, scale, true
		}
		n := g.Producer(v)
		if n == nil {
			return "", 0, false
		}
		if c, x, ok := scalarFactor(g, n); ok {
			scale *= c
			v = x
			continue
		}
		ins := n.Inputs()
		if !layoutNodes[n.Op()] || !g.IsData(ins[0]) || slices.ContainsFunc(ins[1:], g.IsData) {
			return "", 0, false
		}
		v = ins[0]
	}
}

// checkShapes checks at every probe that the products read the inputs'
// sizes: scores (B, H, Tq, Tk) from (B, H, Tq, E) queries and (B, Hkv, Tk,
// E) keys, the output (B, H, Tq, Ev) from (B, Hkv, Tk, Ev) values, Hkv
// dividing H.
func (f *functionalSDPA) checkShapes(g match.Graph, product, pv *match.Node) error {
	for i := range g.Probes() {
		var s [5][]int
		for j, v := range []string{f.q, f.k, f.v, product.Output(), pv.Output()} {
			shape, err := g.ShapeAt(i, v)
			if err != nil {
				return err
			}
			s[j] = shape
		}
		q, k, v, scores, out := s[0], s[1], s[2], s[3], s[4]
		want := []int{q[0], q[1], q[2], k[2]}
		if k[0] != q[0] || v[0] != q[0] || k[1] != v[1] || k[2] != v[2] || k[3] != q[3] || k[1] == 0 || q[1]%k[1] != 0 {
			return fmt.Errorf("query %s, key %s and value %s do not fit (B, H, Tq, E), (B, Hkv, Tk, E), (B, Hkv, Tk, Ev)", fmtShape(q), fmtShape(k), fmtShape(v))
		}
		if !slices.Equal(scores, want) {
			return fmt.Errorf("the scores have shape %s, want %s", fmtShape(scores), fmtShape(want))
		}
		if want = []int{q[0], q[1], q[2], v[3]}; !slices.Equal(out, want) {
			return fmt.Errorf("the output has shape %s, want %s", fmtShape(out), fmtShape(want))
		}
	}
	return nil
}

// layer is the attention.scaled_dot_product layer f describes.
func (f *functionalSDPA) layer(g match.Graph) (*match.Layer, error) {
	if !g.Registered("attention.scaled_dot_product") {
		return nil, match.Refuse(f.nodes, "F.scaled_dot_product_attention: no layer type attention.scaled_dot_product is registered in this build")
	}
	qShape, err := g.Shape(f.q)
	if err != nil {
		return nil, err
	}
	var config []match.Field
	if f.causal {
		config = append(config, match.Field{Key: "causal", Value: true})
	}
	if byWidth := 1 / math.Sqrt(float64(qShape[3])); math.Abs(f.scale-byWidth) > 1e-6*byWidth {
		config = append(config, match.Field{Key: "scale", Value: float32(f.scale)})
	}
	l := &match.Layer{Type: "attention.scaled_dot_product", Name: "attention", Inputs: []string{f.q, f.k, f.v}, Output: f.output}
	if f.mask != "" {
		l.Inputs = append(l.Inputs, f.mask)
		config = append(config, match.Field{Key: "mask", Value: f.maskKind})
		if f.maskKind == "bool" {
			config = append(config, match.Field{Key: "mask_polarity", Value: "keep"})
			l.KeepMasks = []string{f.mask}
		}
		if f.nanRows {
			config = append(config, match.Field{Key: "masked_rows", Value: "nan"})
		}
	}
	l.Config = config
	return l, nil
}

// liftScaledDotProductOp matches ONNX's Attention op on 4-D graph inputs.
func liftScaledDotProductOp(g match.Graph, op *match.Node) (*match.Layer, error) {
	ins, outs := op.Inputs(), op.Outputs()
	if len(ins) < 3 || !sdpaGraphInput(g, ins[0]) || !sdpaGraphInput(g, ins[1]) || !sdpaGraphInput(g, ins[2]) {
		return nil, nil
	}
	refuse := func(format string, args ...any) error {
		return match.Refuse([]*match.Node{op}, "Attention op on graph inputs: "+format, args...)
	}
	for _, extra := range ins[min(4, len(ins)):] {
		if extra != "" {
			return nil, refuse("a past key/value or sequence-length input (%q) has no attention.scaled_dot_product counterpart", extra)
		}
	}
	for _, extra := range outs[1:] {
		if extra != "" && (len(g.Readers(extra)) > 0 || g.IsOutput(extra)) {
			return nil, refuse("its output %q (present key/value or scores) is read", extra)
		}
	}
	if c := op.Float("softcap", 0); c != 0 {
		return nil, refuse("softcap %g", c)
	}
	f := &functionalSDPA{q: ins[0], k: ins[1], v: ins[2], output: op.Output(), causal: op.Int("is_causal", 0) != 0, nodes: []*match.Node{op}}
	qShape, err := g.Shape(f.q)
	if err != nil {
		return nil, err
	}
	f.scale = 1 / math.Sqrt(float64(qShape[3]))
	if op.Has("scale") {
		f.scale = float64(op.Float("scale", 0))
	}
	if len(ins) > 3 && ins[3] != "" {
		f.mask = ins[3]
		if g.Producer(f.mask) != nil {
			return nil, refuse("the attn_mask %q is computed, not a graph input", f.mask)
		}
		t, err := g.ValueAt(0, f.mask)
		if err != nil {
			return nil, err
		}
		f.maskKind = "additive"
		if t.Dtype() == tensor.Bool {
			f.maskKind = "bool"
		}
		if err := maskCoversKeys(g, f.mask, f.k); err != nil {
			return nil, refuse("%v", err)
		}
	}
	return f.layer(g)
}

// maskCoversKeys checks at every probe that the Attention op's mask has a
// column per key: ONNX pads a shorter mask with −Inf, which
// attention.scaled_dot_product does not.
func maskCoversKeys(g match.Graph, mask, key string) error {
	for i := range g.Probes() {
		m, err := g.ShapeAt(i, mask)
		if err != nil {
			return err
		}
		k, err := g.ShapeAt(i, key)
		if err != nil {
			return err
		}
		if len(m) == 0 || m[len(m)-1] != k[2] {
			return fmt.Errorf("the attn_mask %s has not one column per key (%d)", fmtShape(m), k[2])
		}
	}
	return nil
}
