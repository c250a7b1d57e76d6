package exec

import (
	"errors"
	"fmt"
	"math"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/attn"
	"github.com/attnrun/attnrun/internal/kernels"
)

// attentionSpec is the ONNX Attention operator: opset 23, opset 24's
// nonpad_kv_seqlen input and opset 25's sliding windows.
//
// Semantics follow the specification with the errata ONNX applied to both
// versions in place (onnx/onnx#7867, #7913, #8068), which ONNX Runtime 1.30
// implements too:
//
//   - scores are scale·QKᵀ (scale defaults to 1/√head_size), then softcap
//     c·tanh(x/c) when softcap > 0, then the bias is added: attn_mask
//     (bool: true attends; float: added), the causal frontier and the
//     padding bound of nonpad_kv_seqlen; softmax; times V. Softcap comes
//     before the bias so that −Inf stays −Inf.
//   - qk_matmul_output_mode 0 returns the raw scaled scores, 1 the scores
//     after softcap, 2 after the bias, 3 after the softmax. (The first
//     release of Attention-23 numbered 1 and 2 the other way round, with
//     softcap after the mask.)
//   - is_causal lets query i see key j iff j ≤ i + offset, where offset is
//     past_sequence_length with past_key, nonpad_kv_seqlen[b] − q_len with
//     nonpad_kv_seqlen alone, and 0 otherwise: with neither, a query block
//     shorter than the keys is aligned top-left (query 0 sees key 0 only).
//   - left_window_size and right_window_size (opset 25; -1, the default,
//     leaves a side unbounded) let the query at position p = i + offset
//     (the causal offset above, with or without is_causal) see key j iff
//     p − left ≤ j ≤ p + right. The window is one more part of the bias,
//     −Inf added where it hides a key, composed with the causal frontier
//     and the mask.
//   - a query that can see no key gets zeros in Y and in the mode-3 output,
//     not NaN.
//   - attn_mask broadcasts (numpy rules) to (batch, q_heads, q_len, total);
//     a last dimension shorter than total is padded with −Inf (false).
//
// NaN and ±Inf follow ONNX Runtime 1.30, which agrees with the
// specification's formulas here: the bias is added, so a NaN or +Inf score
// that the mask or the causal frontier hides still makes its query's row NaN
// (NaN + −Inf is NaN); Y is the weights times every row of V, so a NaN or
// ±Inf value meets the zero weights of queries that do not see it and makes
// their outputs NaN in its column, fully masked queries included. With
// nonpad_kv_seqlen, ONNX Runtime never looks at the padding's keys, nor
// past the causal frontier (their scores are replaced, not added to), but
// still multiplies the padding's values; the executor does the same.
//
// GQA and MQA: query head h reads K and V head ⌊h / (q_heads/kv_heads)⌋,
// each KV head repeated for consecutive query heads (ONNX's reference tiled
// them until onnx/onnx#7274; ONNX Runtime repeats).
//
// Where ONNX Runtime 1.30 differs (testdata/attention/manifest.json, tested
// by TestAttentionDisagreesWithORT): its mode-2 output holds the lowest
// float32 instead of −Inf where the causal frontier, a bool mask or
// nonpad_kv_seqlen masks a key, and it ignores softmax_precision. It also
// refuses what the specification defines and the executor computes: a 1-D
// attn_mask, one broadcast along the queries or shorter than total, and
// past_key without the present_key output. Both refuse nonpad_kv_seqlen
// outside 0..total, and nonpad_kv_seqlen with past_key.
//
// ONNX Runtime 1.31 runs Attention at opset 25 but refuses the attributes
// left_window_size and right_window_size, which its schema of the op does
// not know. ONNX's checker refuses q_num_heads and kv_num_heads with 4-D
// inputs from opset 25 on; ONNX Runtime 1.31 runs them, and so does the
// executor when they agree with the inputs.
var attentionSpec = &opSpec{since: 23, minIn: 3, maxIn: 7, minOut: 1, maxOut: 4, run: attentionOp,
	attrs: map[string]attrKind{
		"is_causal": attrInt, "scale": attrFloat, "softcap": attrFloat,
		"q_num_heads": attrInt, "kv_num_heads": attrInt,
		"qk_matmul_output_mode": attrInt, "softmax_precision": attrInt,
		"left_window_size": attrInt, "right_window_size": attrInt,
	},
	check: func(n *node) error { _, err := readWindow(n); return err }}

// The inputs and outputs of Attention, by position.
const (
	attnQ, attnK, attnV, attnMask, attnPastKey, attnPastValue, attnNonpad = 0, 1, 2, 3, 4, 5, 6
	attnY, attnPresentKey, attnPresentValue, attnQK                       = 0, 1, 2, 3
)

// attnFloat16 and attnBFloat16 are the ONNX type codes softmax_precision
// may name besides Float32 and Float64: the executor rounds to those types
// but has no tensors of them.
const (
	attnFloat16  DType = 10
	attnBFloat16 DType = 16
)

// attnPlan is one Attention call: its sizes, attributes and operands,
// checked against each other.
type attnPlan struct {
	batch, qHeads, kvHeads int
	qLen, kvLen, pastLen   int
	total                  int // pastLen + kvLen: the keys every query may see
	d, dv                  int // head sizes of Q and K, and of V
	rank3                  bool
	scale, softcap         float32
	causal                 bool
	window                 attn.Frontier // left_window_size and right_window_size, never causal
	mode                   int           // qk_matmul_output_mode, -1 when the output is not asked for
	precision              DType         // softmax_precision; Float32 when absent
	q, k, v, y             heads         // k and v address total keys: the present cache when there is a past
	bias                   attnBias
	nonpad                 []int // nonpad_kv_seqlen per batch, nil when absent
}

// attentionOp is the kernel of Attention.
func attentionOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	p, presentK, presentV, err := planAttention(rc, n, in)
	if err != nil {
		return nil, err
	}
	yShape := []int{p.batch, p.qHeads, p.qLen, p.dv}
	if p.rank3 {
		yShape = []int{p.batch, p.qLen, p.qHeads * p.dv}
	}
	y, err := rc.alloc(n, Float32, yShape)
	if err != nil {
		return nil, err
	}
	p.y = p.layout(y.data.([]float32), p.qHeads, p.qLen, p.dv)
	var qk *value
	if p.mode >= 0 {
		if qk, err = rc.alloc(n, Float32, []int{p.batch, p.qHeads, p.qLen, p.total}); err != nil {
			return nil, err
		}
	}
	fused := p.mode < 0 && p.softcap == 0 && (p.precision == Float32 || p.precision == Float64) && p.d > 0 && p.dv > 0
	switch {
	case p.qLen == 0 || p.total == 0 || y.size() == 0 && qk == nil:
		// Nothing to compute: no query, no key to see (Y is zeros), or no
		// output element.
	case fused:
		err = p.attendFused(rc, n)
	default:
		err = p.attendStepwise(rc, n, qk)
	}
	if err != nil {
		return nil, err
	}
	return []*value{y, presentK, presentV, qk}, nil
}

// planAttention reads the attributes and inputs of an Attention node and
// checks them against each other. It also returns present_key and
// present_value: the past with the new keys and values appended, in
// (batch, kv_heads, total, head_size) layout.
func planAttention(rc *runCtx, n *node, in []*value) (p *attnPlan, presentK, presentV *value, err error) {
	p = &attnPlan{mode: -1, precision: Float32}
	if err := p.readAttributes(n); err != nil {
		return nil, nil, nil, err
	}
	q, k, v := in[attnQ], in[attnK], in[attnV]
	mask, pastK, pastV, nonpad := input(in, attnMask), input(in, attnPastKey), input(in, attnPastValue), input(in, attnNonpad)
	for _, x := range []struct {
		name string
		v    *value
	}{{"Q", q}, {"K", k}, {"V", v}, {"past_key", pastK}, {"past_value", pastV}} {
		if x.v != nil && x.v.dtype != Float32 {
			return nil, nil, nil, fmt.Errorf("%s is %s; Attention is computed in float32", x.name, x.v.dtype)
		}
	}
	if err := p.readShapes(n, q, k, v); err != nil {
		return nil, nil, nil, err
	}
	if err := p.readPast(pastK, pastV); err != nil {
		return nil, nil, nil, err
	}
	if nonpad != nil {
		if err := p.readNonpad(n, nonpad, pastK != nil); err != nil {
			return nil, nil, nil, err
		}
	}
	if !p.windowHides() {
		p.window = attn.Unbounded // a window as wide as the keys is no window
	}
	if p.bias, err = p.newBias(mask); err != nil {
		return nil, nil, nil, err
	}
	if len(n.out) > attnQK && n.out[attnQK] >= 0 {
		p.mode = int(n.attrInt("qk_matmul_output_mode", 0))
	}

	p.q = p.layout(q.data.([]float32), p.qHeads, p.qLen, p.d)
	kIn := p.layout(k.data.([]float32), p.kvHeads, p.kvLen, p.d)
	vIn := p.layout(v.data.([]float32), p.kvHeads, p.kvLen, p.dv)
	wantPresent := len(n.out) > attnPresentValue && (n.out[attnPresentKey] >= 0 || n.out[attnPresentValue] >= 0)
	p.k, p.v = kIn, vIn
	if pastK != nil || wantPresent {
		if presentK, err = p.present(rc, n, pastK, kIn, p.d); err != nil {
			return nil, nil, nil, err
		}
		if presentV, err = p.present(rc, n, pastV, vIn, p.dv); err != nil {
			return nil, nil, nil, err
		}
		p.k = heads4D(presentK.data.([]float32), p.kvHeads, p.total, p.d)
		p.v = heads4D(presentV.data.([]float32), p.kvHeads, p.total, p.dv)
	}
	return p, presentK, presentV, nil
}

// readAttributes decodes and checks the attributes that do not depend on
// the inputs.
func (p *attnPlan) readAttributes(n *node) error {
	switch c := n.attrInt("is_causal", 0); c {
	case 0, 1:
		p.causal = c == 1
	default:
		return fmt.Errorf("is_causal is %d, want 0 or 1", c)
	}
	if n.has("scale") {
		p.scale = n.attrFloat("scale", 0)
		if !(p.scale > 0) || math.IsInf(float64(p.scale), 1) {
			return fmt.Errorf("scale is %g, want a positive finite number", p.scale)
		}
	}
	p.softcap = n.attrFloat("softcap", 0)
	if !(p.softcap >= 0) || math.IsInf(float64(p.softcap), 1) {
		return fmt.Errorf("softcap is %g, want 0 (off) or a positive finite number", p.softcap)
	}
	if m := n.attrInt("qk_matmul_output_mode", 0); m < 0 || m > 3 {
		return fmt.Errorf("qk_matmul_output_mode is %d, want 0 (scores), 1 (after softcap), 2 (after the mask) or 3 (after the softmax)", m)
	}
	w, err := readWindow(n)
	if err != nil {
		return err
	}
	p.window = w
	if n.has("softmax_precision") {
		switch prec := DType(n.attrInt("softmax_precision", 0)); prec {
		case Float32, Float64, attnFloat16, attnBFloat16:
			p.precision = prec
		default:
			return fmt.Errorf("softmax_precision is %s, want float32 (1), float16 (10), float64 (11) or bfloat16 (16)", prec)
		}
	}
	return nil
}

// readWindow decodes left_window_size and right_window_size, attributes
// from opset 25 on.
func readWindow(n *node) (attn.Frontier, error) {
	w := attn.Unbounded
	for _, a := range []struct {
		name string
		size *int
	}{{"left_window_size", &w.Left}, {"right_window_size", &w.Right}} {
		if !n.has(a.name) {
			continue
		}
		if n.opset < 25 {
			return w, fmt.Errorf("%s is an attribute from opset 25 on; the model imports opset %d", a.name, n.opset)
		}
		size := n.attrInt(a.name, -1)
		if size < -1 || size > math.MaxInt32 {
			return w, fmt.Errorf("%s is %d, want -1 (unbounded) or a key count from 0 on", a.name, size)
		}
		*a.size = int(size)
	}
	return w, nil
}

// readShapes sizes the call from Q, K and V: all (batch, heads, seq,
// head_size), or all (batch, seq, heads·head_size) with the head counts as
// attributes.
func (p *attnPlan) readShapes(n *node, q, k, v *value) error {
	qHeads, kvHeads := int(n.attrInt("q_num_heads", 0)), int(n.attrInt("kv_num_heads", 0))
	if q.rank() != k.rank() || q.rank() != v.rank() || (q.rank() != 3 && q.rank() != 4) {
		return fmt.Errorf("inputs Q %s, K %s and V %s must all be 3-D (batch, seq, hidden) or all 4-D (batch, heads, seq, head_size)",
			shapeString(q.shape), shapeString(k.shape), shapeString(v.shape))
	}
	p.batch = q.shape[0]
	if k.shape[0] != p.batch || v.shape[0] != p.batch {
		return fmt.Errorf("batch sizes differ: Q %s, K %s, V %s", shapeString(q.shape), shapeString(k.shape), shapeString(v.shape))
	}
	if q.rank() == 3 {
		if qHeads <= 0 || kvHeads <= 0 {
			return fmt.Errorf("3-D Q %s needs positive q_num_heads and kv_num_heads attributes (they are %d and %d)", shapeString(q.shape), qHeads, kvHeads)
		}
		p.rank3, p.qHeads, p.kvHeads = true, qHeads, kvHeads
		p.qLen, p.kvLen = q.shape[1], k.shape[1]
		for _, x := range []struct {
			name  string
			v     *value
			heads int
			size  *int
		}{{"Q", q, qHeads, &p.d}, {"K", k, kvHeads, nil}, {"V", v, kvHeads, &p.dv}} {
			if x.v.shape[2]%x.heads != 0 {
				return fmt.Errorf("%s %s: hidden size %d is not a multiple of %d heads", x.name, shapeString(x.v.shape), x.v.shape[2], x.heads)
			}
			if x.size != nil {
				*x.size = x.v.shape[2] / x.heads
			}
		}
		if k.shape[2] != kvHeads*p.d {
			return fmt.Errorf("input K %s: hidden size %d, want kv_num_heads %d × Q's head size %d", shapeString(k.shape), k.shape[2], kvHeads, p.d)
		}
	} else {
		p.qHeads, p.qLen, p.d = q.shape[1], q.shape[2], q.shape[3]
		p.kvHeads, p.kvLen, p.dv = k.shape[1], k.shape[2], v.shape[3]
		if k.shape[3] != p.d {
			return fmt.Errorf("input K %s: head size %d, Q %s has %d", shapeString(k.shape), k.shape[3], shapeString(q.shape), p.d)
		}
		if v.shape[1] != p.kvHeads {
			return fmt.Errorf("input V %s has %d heads, K %s has %d", shapeString(v.shape), v.shape[1], shapeString(k.shape), p.kvHeads)
		}
		if (qHeads != 0 && qHeads != p.qHeads) || (kvHeads != 0 && kvHeads != p.kvHeads) {
			return fmt.Errorf("q_num_heads %d and kv_num_heads %d disagree with 4-D Q %s and K %s", qHeads, kvHeads, shapeString(q.shape), shapeString(k.shape))
		}
	}
	if v.shape[v.rank()-2] != p.kvLen {
		return fmt.Errorf("inputs K %s and V %s have different sequence lengths", shapeString(k.shape), shapeString(v.shape))
	}
	if p.kvHeads == 0 || p.qHeads%p.kvHeads != 0 {
		return fmt.Errorf("q_num_heads %d is not a multiple of kv_num_heads %d", p.qHeads, p.kvHeads)
	}
	if p.scale == 0 {
		if p.d == 0 {
			return errors.New("head size is 0: the default scale 1/√head_size is undefined")
		}
		p.scale = float32(1 / math.Sqrt(float64(p.d)))
	}
	p.total = p.kvLen
	return nil
}

// readPast checks past_key and past_value, which come together.
func (p *attnPlan) readPast(pastK, pastV *value) error {
	if (pastK == nil) != (pastV == nil) {
		return errors.New("past_key and past_value must be given together")
	}
	if pastK == nil {
		return nil
	}
	if pastK.rank() != 4 || pastV.rank() != 4 || pastV.shape[2] != pastK.shape[2] {
		return fmt.Errorf("past_key %s and past_value %s must be 4-D (batch, kv_heads, past_seq, head_size) with one past length",
			shapeString(pastK.shape), shapeString(pastV.shape))
	}
	p.pastLen = pastK.shape[2]
	if want := []int{p.batch, p.kvHeads, p.pastLen, p.d}; !equalShapes(pastK.shape, want) {
		return fmt.Errorf("past_key %s, want %s", shapeString(pastK.shape), shapeString(want))
	}
	if want := []int{p.batch, p.kvHeads, p.pastLen, p.dv}; !equalShapes(pastV.shape, want) {
		return fmt.Errorf("past_value %s, want %s", shapeString(pastV.shape), shapeString(want))
	}
	p.total = p.pastLen + p.kvLen
	return nil
}

// readNonpad checks nonpad_kv_seqlen (opset 24): how many leading keys of
// each batch entry are real, K and V being a padded external cache.
func (p *attnPlan) readNonpad(n *node, nonpad *value, hasPast bool) error {
	if n.opset < 24 {
		return fmt.Errorf("nonpad_kv_seqlen is an input from opset 24 on; the model imports opset %d", n.opset)
	}
	if hasPast {
		// The specification allows one cache or the other: K and V are either
		// the new keys (with past_key) or the whole cache (with nonpad_kv_seqlen).
		return errors.New("nonpad_kv_seqlen cannot be combined with past_key and past_value")
	}
	if nonpad.dtype != Int64 || !equalShapes(nonpad.shape, []int{p.batch}) {
		return fmt.Errorf("nonpad_kv_seqlen is %s, want int64 (%d,)", nonpad.describe(), p.batch)
	}
	p.nonpad = make([]int, p.batch)
	for b, l := range nonpad.data.([]int64) {
		if l < 0 || l > int64(p.total) {
			return fmt.Errorf("nonpad_kv_seqlen[%d] is %d, want 0 to %d (the key length)", b, l, p.total)
		}
		p.nonpad[b] = int(l)
	}
	return nil
}

// layout addresses the heads of a Q, K, V or Y tensor of this call.
func (p *attnPlan) layout(data []float32, h, s, d int) heads {
	if p.rank3 {
		return heads{data: data, batch: s * h * d, head: d, row: h * d}
	}
	return heads4D(data, h, s, d)
}

// present returns past (if any) with the new keys or values appended along
// the sequence, as a (batch, kv_heads, total, size) tensor allocated for
// node n.
func (p *attnPlan) present(rc *runCtx, n *node, past *value, cur heads, size int) (*value, error) {
	out, err := rc.alloc(n, Float32, []int{p.batch, p.kvHeads, p.total, size})
	if err != nil {
		return nil, err
	}
	ov := contiguous(out.shape)
	if past != nil {
		copyView(out.data, ov, past.data, contiguous(past.shape), past.shape)
	}
	dst := view{offset: p.pastLen * size, strides: ov.strides}
	copyView(out.data, dst, cur.data, cur.view(), []int{p.batch, p.kvHeads, p.kvLen, size})
	return out, nil
}

// kvHead is the K and V head query head h reads: GQA and MQA repeat each of
// the kv_heads for q_heads/kv_heads consecutive query heads.
func (p *attnPlan) kvHead(h int) int { return attn.KVHead(h, p.qHeads, p.kvHeads) }

// causalOffset is the shift of the causal frontier in batch entry b: query
// i may see key j iff j ≤ i + offset.
func (p *attnPlan) causalOffset(b int) int {
	switch {
	case p.pastLen > 0:
		return p.pastLen
	case p.nonpad != nil:
		return p.nonpad[b] - p.qLen
	}
	return 0
}

// windowHides reports whether the window hides a key from some query that
// the causal frontier, if any, does not hide already.
func (p *attnPlan) windowHides() bool {
	w := p.window
	if p.causal {
		w.Right = -1 // the causal frontier hides every key after the query
	}
	for b := range p.batch {
		if w.MayHide(p.causalOffset(b), p.qLen, 0, p.total) { // query 0 sits at causalOffset(b)
			return true
		}
	}
	return false
}

// kernelCausal reports whether the fused kernel's causal frontier, aligned
// bottom-right on the keys it is given, is the specification's. Without
// nonpad_kv_seqlen the frontier is added to the scores, which the kernel's
// skipping equals only when every score is finite (kernels.FiniteScores);
// a single query hides no key.
func (p *attnPlan) kernelCausal() bool {
	if !p.causal {
		return false
	}
	if p.nonpad != nil {
		return true
	}
	return p.causalOffset(0) == p.total-p.qLen &&
		(p.qLen == 1 || kernels.FiniteScores(p.q.data, p.k.data, p.d, p.scale))
}

// attendFused runs the plain case (no scores asked for, no softcap, softmax
// in float32 or wider) on kernels.AttendBatch. nonpad_kv_seqlen shortens
// each batch entry's keys, which also makes the kernel's bottom-right
// causal alignment the specification's; otherwise the causal frontier is
// the kernel's only when the query and new key lengths agree, and is part
// of the bias when they do not. A window is always part of the bias: the
// specification adds it.
func (p *attnPlan) attendFused(rc *runCtx, n *node) error {
	kernelCausal := p.kernelCausal()
	biases, err := p.bias.distinct(rc, n, p.causal && !kernelCausal)
	if err != nil {
		return err
	}
	hs, err := scratch[kernels.Head](rc, n, p.batch*p.qHeads, "attention heads")
	if err != nil {
		return err
	}
	hs = hs[:0]
	for b := range p.batch {
		tk := p.total
		if p.nonpad != nil {
			tk = p.nonpad[b]
		}
		for h := range p.qHeads {
			kv := p.kvHead(h)
			head := kernels.Head{
				Q: p.q.at(b, h), LdQ: p.q.row,
				K: p.k.at(b, kv), LdK: p.k.row,
				V: p.v.at(b, kv), LdV: p.v.row,
				Out: p.y.at(b, h), LdOut: p.y.row,
				Tq: p.qLen, Tk: tk, D: p.d, Dv: p.dv,
			}
			if biases != nil {
				head.Mask, head.LdMask = biases[p.bias.index(b, h)], p.total
			}
			hs = append(hs, head)
		}
	}
	if err := attendBatch(rc, hs, kernels.AttentionOptions{Scale: p.scale, Causal: kernelCausal}); err != nil {
		return err
	}
	if p.nonpad != nil {
		p.padValuesMeetZeroWeights()
	}
	return nil
}

// padValuesMeetZeroWeights does for the padding what the kernel, given
// only nonpad_kv_seqlen[b] keys, did not: its values are multiplied by
// weights of 0, so a NaN or ±Inf value there makes its column of Y NaN for
// every query of every head that reads it.
func (p *attnPlan) padValuesMeetZeroWeights() {
	nan := float32(math.NaN())
	for b := range p.batch {
		for g := range p.kvHeads {
			v := p.v.at(b, g)
			for j := p.nonpad[b]; j < p.total; j++ {
				for c, x := range v[j*p.v.row : j*p.v.row+p.dv] {
					if x-x == 0 { // finite
						continue
					}
					for h := range p.qHeads {
						if p.kvHead(h) != g {
							continue
						}
						y := p.y.at(b, h)
						for i := range p.qLen {
							y[i*p.y.row+c] = nan
						}
					}
				}
			}
		}
	}
}

// attendStepwise computes each head step by step with attn.Exact, as the
// specification writes it, keeping the intermediate scores
// qk_matmul_output asks for: scores, softcap, bias, softmax (in
// softmax_precision), product with V. A query that can see no key (its
// bias all −Inf) gets zeros, as the specification's errata says. There is
// at least one query and one key.
func (p *attnPlan) attendStepwise(rc *runCtx, n *node, qk *value) error {
	scores, err := scratch[float32](rc, n, p.qLen*p.total, "attention scores")
	if err != nil {
		return err
	}
	bias, err := scratch[float32](rc, n, p.qLen*p.total, "attention bias")
	if err != nil {
		return err
	}
	e := attn.Exact{Scale: p.scale, Softcap: p.softcap, Bias: bias, Precision: array.DType(p.precision), Ctx: rc.ctx}
	for b := range p.batch {
		if p.nonpad != nil {
			e.Hide = func(row []float32, i int) { p.hidePadding(row, b, i) }
		}
		for h := range p.qHeads {
			kv := p.kvHead(h)
			if err := rc.err(); err != nil {
				return err
			}
			if qk != nil {
				e.Snapshot = func(st attn.Stage, s []float32) {
					if int(st) == p.mode {
						copy(qk.data.([]float32)[(b*p.qHeads+h)*len(s):], s)
					}
				}
			}
			p.bias.fill(bias, b, h, p.causal)
			head := kernels.Head{
				Q: p.q.at(b, h), LdQ: p.q.row,
				K: p.k.at(b, kv), LdK: p.k.row,
				V: p.v.at(b, kv), LdV: p.v.row,
				Out: p.y.at(b, h), LdOut: p.y.row,
				Tq: p.qLen, Tk: p.total, D: p.d, Dv: p.dv,
			}
			if err := e.Attend(head, scores); err != nil {
				return err
			}
		}
	}
	return nil
}

// hidePadding replaces by −Inf the scores of query i in batch entry b that
// ONNX Runtime never computes with nonpad_kv_seqlen: the padding's and,
// with is_causal, those past the frontier. (The bias added −Inf to them,
// which leaves a NaN or +Inf score NaN.)
func (p *attnPlan) hidePadding(row []float32, b, i int) {
	from := p.nonpad[b]
	if p.causal {
		from = min(from, max(0, i+p.causalOffset(b)+1))
	}
	attn.FillNegInf(row[from:])
}

// heads addresses the heads of a (batch, heads, seq, size) or (batch, seq,
// heads·size) tensor in place: head h of batch entry b starts at
// b·batch + h·head and its rows are row floats apart.
type heads struct {
	data             []float32
	batch, head, row int
}

// heads4D is the layout of a contiguous (batch, h, s, d) tensor.
func heads4D(data []float32, h, s, d int) heads {
	return heads{data: data, batch: h * s * d, head: s * d, row: d}
}

// at returns the data from head h of batch entry b on.
func (x heads) at(b, h int) []float32 {
	off := b*x.batch + h*x.head
	if off >= len(x.data) {
		return nil // an empty head: no rows or no columns
	}
	return x.data[off:]
}

// view reads the tensor as (batch, heads, seq, size).
func (x heads) view() view { return view{strides: []int{x.batch, x.head, x.row, 1}} }

// attnBias is what attn_mask, is_causal and nonpad_kv_seqlen add to the
// scores of each head: 0 where a query may see a key, the float mask's
// value, or −Inf.
type attnBias struct {
	p      *attnPlan
	mask   *attn.Mask // attn_mask (bool: true attends; float32: added), nil when absent
	mb, mh int        // the mask's batch and head sizes after broadcasting: 1 or the full size
}

// newBias checks attn_mask against the scores it is added to.
func (p *attnPlan) newBias(mask *value) (attnBias, error) {
	ab := attnBias{p: p, mb: 1, mh: 1}
	if p.window != attn.Unbounded && p.nonpad != nil {
		ab.mb = p.batch // the window's offset depends on nonpad_kv_seqlen[b]
	}
	if mask == nil {
		return ab, nil
	}
	if mask.dtype != Bool && mask.dtype != Float32 {
		return ab, fmt.Errorf("attn_mask is %s; want bool (true attends) or float32 (added to the scores)", mask.dtype)
	}
	if mask.rank() == 0 {
		return ab, fmt.Errorf("attn_mask () needs a key axis: it broadcasts to (batch, q_heads, q_len, total) = %s",
			shapeString([]int{p.batch, p.qHeads, p.qLen, p.total}))
	}
	if mask.rank() > 4 {
		return ab, fmt.Errorf("attn_mask %s has rank %d; it must broadcast to (batch, q_heads, q_len, total) = %s",
			shapeString(mask.shape), mask.rank(), shapeString([]int{p.batch, p.qHeads, p.qLen, p.total}))
	}
	shape := append([]int{1, 1, 1, 1}[:4-mask.rank()], mask.shape...)
	strides := stridesOf(shape)
	for i, want := range []int{p.batch, p.qHeads, p.qLen} {
		switch shape[i] {
		case want:
		case 1:
			strides[i] = 0
		default:
			return ab, fmt.Errorf("attn_mask %s does not broadcast to (batch, q_heads, q_len, total) = %s",
				shapeString(mask.shape), shapeString([]int{p.batch, p.qHeads, p.qLen, p.total}))
		}
	}
	if shape[3] > p.total {
		return ab, fmt.Errorf("attn_mask %s is longer than the %d keys (past and new)", shapeString(mask.shape), p.total)
	}
	// The columns after the mask's last are −Inf (false).
	ab.mask = &attn.Mask{Kind: attn.MaskAdd, SB: strides[0], SH: strides[1], SI: strides[2], SJ: 1, Cols: shape[3], Past: float32(math.Inf(-1))}
	switch data := mask.data.(type) {
	case []float32:
		ab.mask.Values = data
	case []bool:
		ab.mask.Bools = data
	}
	if strides[0] != 0 {
		ab.mb = p.batch
	}
	if strides[1] != 0 {
		ab.mh = p.qHeads
	}
	return ab, nil
}

// index numbers the distinct biases of the mask: head h of batch entry b
// uses bias index(b, h).
func (ab *attnBias) index(b, h int) int { return (b%ab.mb)*ab.mh + h%ab.mh }

// distinct returns the bias of each distinct mask slice (see index) for
// the fused kernel, with the causal frontier when withCausal and the
// window, or nil when nothing is to be added. nonpad_kv_seqlen is left
// out: the fused kernel is given fewer keys instead.
func (ab *attnBias) distinct(rc *runCtx, n *node, withCausal bool) ([][]float32, error) {
	if ab.mask == nil && !withCausal && ab.p.window == attn.Unbounded {
		return nil, nil
	}
	p := ab.p
	out := make([][]float32, ab.mb*ab.mh)
	for b := range ab.mb {
		for h := range ab.mh {
			buf, err := scratch[float32](rc, n, p.qLen*p.total, "attention mask")
			if err != nil {
				return nil, err
			}
			ab.rows(buf, b, h, withCausal)
			out[ab.index(b, h)] = buf
		}
	}
	return out, nil
}

// fill writes the whole bias of head h of batch entry b into dst (q_len ×
// total): the mask, the causal frontier when causal, the window and the
// padding bound.
func (ab *attnBias) fill(dst []float32, b, h int, causal bool) {
	p := ab.p
	ab.rows(dst, b, h, causal)
	if p.nonpad != nil {
		for i := range p.qLen {
			row := dst[i*p.total : (i+1)*p.total]
			attn.FillNegInf(row[p.nonpad[b]:])
		}
	}
}

// rows writes the bias of head h of batch entry b into dst (q_len ×
// total) as attn.Bias computes it: the float mask's values or 0/−Inf for a
// bool mask (−Inf past the mask's last column, 0 without a mask), and −Inf
// outside each query's window and, when causal, after its causal frontier
// j ≤ i + causalOffset(b): query i sits at position i + causalOffset(b).
func (ab *attnBias) rows(dst []float32, b, h int, causal bool) {
	p := ab.p
	bias := attn.Bias{Frontier: p.window}
	bias.Frontier.Causal = causal
	if ab.mask != nil {
		bias.Masks = []attn.Mask{*ab.mask}
	}
	offset := p.causalOffset(b)
	for i := range p.qLen {
		bias.Row(dst[i*p.total:(i+1)*p.total], b, h, i, i+offset, 0)
	}
}
