package exec

import (
	"errors"
	"fmt"
	"math"

	"github.com/attnrun/attnrun/internal/kernels"
)

// FlexAttention (ai.onnx.preview, version 1) is scaled dot-product
// attention over rank-4 inputs with two optional subgraphs, after PyTorch's
// flex_attention:
//
//	Scores = scale · Q·Kᵀ              (B, H_q, L, S); scale defaults to 1/√E
//	Scores = score_mod(Scores)         if score_mod is given
//	Probs  = Softmax(Scores, axis=-1)
//	Probs  = prob_mod(Probs)           if prob_mod is given
//	Y      = Probs·V                   (B, H_q, L, E_v)
//
// Q is (B, H_q, L, E), K (B, H_kv, S, E) and V (B, H_kv, S, E_v); query
// head h reads K/V head ⌊h / (H_q/H_kv)⌋ (GQA). Each modifier is a graph of
// one rank-4 input and one output of the same shape and element type; a
// mask is a score_mod that writes −Inf. The scores, probabilities and the
// product with V are computed in softmax_precision: float32, or float64
// for float64 inputs unless the attribute says otherwise; Y has Q's type.
//
// Earlier drafts of the operator had a mask_mod subgraph (and modifiers
// called once per score, with its indices); the version ONNX's node tests
// use has neither, and a node with mask_mod is refused rather than run with
// its mask ignored.
func init() {
	ops[opKey(previewDomain, "FlexAttention")] = &opSpec{since: 1, minIn: 3, maxIn: 3, minOut: 1, maxOut: 1,
		run: flexAttentionOp, check: checkFlexAttention,
		attrs: map[string]attrKind{
			"scale": attrFloat, "softmax_precision": attrInt,
			"score_mod": attrGraph, "prob_mod": attrGraph, "mask_mod": attrGraph,
		}}
}

// checkFlexAttention checks the attributes of a FlexAttention node.
func checkFlexAttention(n *node) error {
	if n.has("mask_mod") {
		return errors.New("has attribute \"mask_mod\", which FlexAttention no longer defines: write masks into score_mod as -Inf")
	}
	if n.has("softmax_precision") {
		switch dt := DType(n.attrInt("softmax_precision", 0)); dt {
		case Float32, Float64:
		case attnFloat16, attnBFloat16:
			return fmt.Errorf("softmax_precision %s is not supported (float32 or float64)", dt)
		default:
			return fmt.Errorf("softmax_precision %s is not a floating-point type (float32 or float64)", dt)
		}
	}
	for _, name := range []string{"score_mod", "prob_mod"} {
		if sg := n.attrGraph(name); sg != nil && (len(sg.g.inputs) != 1 || len(sg.g.outputs) != 1) {
			return fmt.Errorf("subgraph %q has %d inputs and %d outputs; a modifier has one of each", name, len(sg.g.inputs), len(sg.g.outputs))
		}
	}
	return nil
}

// flexPlan is one FlexAttention call: its sizes, checked against each
// other.
type flexPlan struct {
	batch, qHeads, kvHeads, group int
	qLen, kvLen, d, dv            int
	scale                         float64
	precision                     DType
}

// flexAttentionOp is the kernel of FlexAttention.
func flexAttentionOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	p, err := planFlexAttention(n, in)
	if err != nil {
		return nil, err
	}
	if p.precision == Float64 {
		return runFlexAttention[float64](rc, n, p, in)
	}
	return runFlexAttention[float32](rc, n, p, in)
}

// planFlexAttention checks the inputs' types and shapes and reads the
// attributes.
func planFlexAttention(n *node, in []*value) (*flexPlan, error) {
	q, k, v := in[0], in[1], in[2]
	for _, x := range []struct {
		name string
		v    *value
	}{{"Q", q}, {"K", k}, {"V", v}} {
		switch {
		case !x.v.dtype.IsFloat():
			return nil, fmt.Errorf("input %s is %s; FlexAttention takes float32 or float64", x.name, x.v.describe())
		case x.v.dtype != q.dtype:
			return nil, fmt.Errorf("input %s is %s and Q %s: they must have the same element type", x.name, x.v.describe(), q.describe())
		case x.v.rank() != 4:
			return nil, fmt.Errorf("input %s is %s; it must be rank 4 (batch, heads, sequence, head_size)", x.name, x.v.describe())
		}
	}
	p := &flexPlan{batch: q.shape[0], qHeads: q.shape[1], qLen: q.shape[2], d: q.shape[3],
		kvHeads: k.shape[1], kvLen: k.shape[2], dv: v.shape[3]}
	if k.shape[0] != p.batch || k.shape[3] != p.d {
		return nil, fmt.Errorf("input K is %s, want (%d, kv_heads, kv_len, %d) for Q %s", k.describe(), p.batch, p.d, shapeString(q.shape))
	}
	if v.shape[0] != p.batch || v.shape[1] != p.kvHeads || v.shape[2] != p.kvLen {
		return nil, fmt.Errorf("input V is %s, want (%d, %d, %d, v_head_size) for K %s", v.describe(), p.batch, p.kvHeads, p.kvLen, shapeString(k.shape))
	}
	if p.kvHeads == 0 || p.qHeads%p.kvHeads != 0 {
		return nil, fmt.Errorf("input Q has %d heads and K %d: the query heads must be a multiple of the key heads", p.qHeads, p.kvHeads)
	}
	p.group = p.qHeads / p.kvHeads
	p.scale = 1 / math.Sqrt(float64(p.d))
	if n.has("scale") {
		p.scale = float64(n.attrFloat("scale", 0))
	}
	p.precision = Float32
	if q.dtype == Float64 {
		p.precision = Float64
	}
	if n.has("softmax_precision") {
		p.precision = DType(n.attrInt("softmax_precision", 0))
	}
	return p, nil
}

// runFlexAttention computes the output in the softmax precision C.
func runFlexAttention[C float](rc *runCtx, n *node, p *flexPlan, in []*value) ([]*value, error) {
	q, err := floatData[C](rc, n, in[0])
	if err != nil {
		return nil, err
	}
	k, err := floatData[C](rc, n, in[1])
	if err != nil {
		return nil, err
	}
	v, err := floatData[C](rc, n, in[2])
	if err != nil {
		return nil, err
	}
	shape := []int{p.batch, p.qHeads, p.qLen, p.kvLen}
	scores, err := rc.alloc(n, p.precision, shape)
	if err != nil {
		return nil, err
	}
	L, S := p.qLen, p.kvLen
	err = p.eachHead(rc, func(b, h, kvh int) {
		matmulNT(scores.data.([]C)[(b*p.qHeads+h)*L*S:], q[(b*p.qHeads+h)*L*p.d:], k[(b*p.kvHeads+kvh)*S*p.d:], L, S, p.d, p.scale)
	})
	if err != nil {
		return nil, err
	}
	if scores, err = modify(rc, n, "score_mod", scores, in); err != nil {
		return nil, err
	}
	probs, err := rc.alloc(n, p.precision, shape)
	if err != nil {
		return nil, err
	}
	copy(probs.data.([]C), scores.data.([]C))
	softmaxLastAxis(probs.data.([]C), numel(shape[:3]), S)
	if probs, err = modify(rc, n, "prob_mod", probs, in); err != nil {
		return nil, err
	}
	yShape := []int{p.batch, p.qHeads, L, p.dv}
	y, err := rc.alloc(n, p.precision, yShape)
	if err != nil {
		return nil, err
	}
	err = p.eachHead(rc, func(b, h, kvh int) {
		matmulNN(y.data.([]C)[(b*p.qHeads+h)*L*p.dv:], probs.data.([]C)[(b*p.qHeads+h)*L*S:], v[(b*p.kvHeads+kvh)*S*p.dv:], L, p.dv, S)
	})
	if err != nil {
		return nil, err
	}
	return oneOrErr(floatValue(rc, n, in[0].dtype, yShape, y.data.([]C)))
}

// eachHead calls f for every batch and query head with the KV head it
// reads, checking the run's context before each.
func (p *flexPlan) eachHead(rc *runCtx, f func(b, h, kvh int)) error {
	for b := range p.batch {
		for h := range p.qHeads {
			if err := rc.ctx.Err(); err != nil {
				return err
			}
			f(b, h, h/p.group)
		}
	}
	return nil
}

// modify runs the modifier subgraph name of node n, if it has one, on x and
// checks that it returns a value of x's element type and shape.
func modify(rc *runCtx, n *node, name string, x *value, in []*value) (*value, error) {
	sg := n.attrGraph(name)
	if sg == nil {
		return x, nil
	}
	outs, err := sg.call(rc, []*value{x}, in)
	if err != nil {
		return nil, err
	}
	y := outs[0]
	if y.dtype != x.dtype || !equalShapes(y.shape, x.shape) {
		return nil, fmt.Errorf("subgraph %q returned %s for its input %s; a modifier keeps the element type and shape", name, y.describe(), x.describe())
	}
	return y, nil
}

// softmaxLastAxis normalizes rows of width d in place, as the Softmax op
// does: a row of all -Inf becomes NaN.
func softmaxLastAxis[C float](x []C, rows, d int) {
	switch x := any(x).(type) {
	case []float32:
		kernels.SoftmaxRows(x, rows, d)
	case []float64:
		softmaxLines(x, rows, d, 1, false)
	}
}

// matmulNT sets c (m×n) to alpha·a·bᵀ for a (m×k) and b (n×k), all dense
// and row-major: float32 on kernels.Gemm, float64 summed in order.
func matmulNT[C float](c, a, b []C, m, n, k int, alpha float64) {
	if m == 0 || n == 0 || k == 0 {
		return // c stays zero
	}
	if c32, ok := any(c).([]float32); ok {
		kernels.Gemm(false, true, m, n, k, float32(alpha), any(a).([]float32), k, any(b).([]float32), k, 0, c32, n)
		return
	}
	for i := range m {
		for j := range n {
			var s float64
			for l := range k {
				s += float64(a[i*k+l]) * float64(b[j*k+l])
			}
			c[i*n+j] = C(alpha * s)
		}
	}
}

// matmulNN sets c (m×n) to a·b for a (m×k) and b (k×n).
func matmulNN[C float](c, a, b []C, m, n, k int) {
	if m == 0 || n == 0 || k == 0 {
		return
	}
	if c32, ok := any(c).([]float32); ok {
		kernels.Gemm(false, false, m, n, k, 1, any(a).([]float32), k, any(b).([]float32), n, 0, c32, n)
		return
	}
	for i := range m {
		row := c[i*n : (i+1)*n]
		for l := range k {
			ail := float64(a[i*k+l])
			for j := range n {
				row[j] = C(float64(row[j]) + ail*float64(b[l*n+j]))
			}
		}
	}
}
