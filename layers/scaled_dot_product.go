package layers

import (
	"errors"
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/attn"
	"github.com/attnrun/attnrun/registry"
)

// ScaledDotProduct is attention.scaled_dot_product, PyTorch's functional
// F.scaled_dot_product_attention(query, key, value, attn_mask, is_causal,
// scale, enable_gqa): attention over heads that some other layer (or the
// model's inputs) already split, with no projections and no parameters.
//
// Inputs: query (B, H, Tq, E), key (B, Hkv, Tk, E), value (B, Hkv, Tk, Ev),
// and with mask configured the mask, last, broadcast to (B, H, Tq, Tk)
// from the right. The output is (B, H, Tq, Ev). Hkv must divide H: query
// head h reads key/value head ⌊h / (H/Hkv)⌋ (enable_gqa=True; Hkv = H is
// plain multi-head attention).
//
// Per head, the scores of query i and key j are scale · q_i·k_j (scale
// defaults to 1/√E); causal hides the keys j > i (PyTorch's is_causal and
// the ONNX Attention op align the frontier top-left); mask: bool hides the
// keys its mask_polarity says ("keep": nonzero attends, as PyTorch), mask:
// additive adds the mask. A hidden key's score is replaced by −Inf,
// whatever it was. A query that sees no key outputs zeros (masked_rows:
// zeros, as PyTorch 2.x's decomposition and the ONNX op give) or NaN
// (masked_rows: nan, a plain softmax).
type ScaledDotProduct struct {
	// Causal hides the keys after each query's position, top-left aligned.
	Causal bool `yaml:"causal"`
	// Scale multiplies q·k (default 0 means 1/√E).
	Scale float64 `yaml:"scale"`
	// Mask is the kind of the mask input: "" (none), "bool" or "additive".
	Mask string `yaml:"mask"`
	// MaskPolarity says what a nonzero bool mask value means: "keep"
	// (attend) or "mask" (masked out). Required with mask: bool.
	MaskPolarity string `yaml:"mask_polarity"`
	// MaskedRows is the output of a query that sees no key: "zeros"
	// (default) or "nan".
	MaskedRows string `yaml:"masked_rows"`

	ready   bool
	mask    attn.MaskKind
	nanRows bool
}

var (
	_ registry.Layer        = (*ScaledDotProduct)(nil)
	_ registry.OutputShaper = (*ScaledDotProduct)(nil)
	_ registry.FLOPCounter  = (*ScaledDotProduct)(nil)
)

func init() {
	registry.Register(registry.Info{
		ID:      "attention.scaled_dot_product",
		Summary: "F.scaled_dot_product_attention on query, key and value inputs (B, H, T, head_dim): no parameters; causal, masks, scale, GQA",
		New:     func() registry.Layer { return &ScaledDotProduct{MaskedRows: "zeros"} },
	})
}

// Validate checks scale, mask, mask_polarity and masked_rows.
func (s *ScaledDotProduct) Validate() error {
	s.ready = false
	if s.Scale < 0 || math.IsNaN(s.Scale) || math.IsInf(s.Scale, 0) {
		return fmt.Errorf("scale %g: want a finite number ≥ 0 (0 means 1/√head_dim)", s.Scale)
	}
	switch s.Mask {
	case "":
		s.mask = 0
		if s.MaskPolarity != "" {
			return errors.New("mask_polarity is set but mask is not: set mask: bool")
		}
	case "bool":
		k, err := boolMaskKind("mask_polarity", s.MaskPolarity)
		if err != nil {
			return err
		}
		s.mask = k
	case "additive":
		s.mask = attn.MaskAdd
		if s.MaskPolarity != "" {
			return errors.New("mask_polarity applies to mask: bool, not to an additive mask")
		}
	default:
		return fmt.Errorf("mask %q is not \"\", \"bool\" or \"additive\"", s.Mask)
	}
	switch s.MaskedRows {
	case "zeros", "nan":
		s.nanRows = s.MaskedRows == "nan"
	default:
		return fmt.Errorf("masked_rows %q is not \"zeros\" or \"nan\"", s.MaskedRows)
	}
	s.ready = true
	return nil
}

// Params returns nil: the layer has no parameters.
func (s *ScaledDotProduct) Params() []registry.Param { return nil }

// headShapes are the sizes of a scaled_dot_product call.
type headShapes struct {
	B, H, KVH, Tq, Tk, E, Ev int
}

// inputCount is how many inputs the layer takes.
func (s *ScaledDotProduct) inputCount() int {
	if s.Mask != "" {
		return 4
	}
	return 3
}

// shapes checks the query, key and value shapes against each other.
func (s *ScaledDotProduct) shapes(inputs []tensor.Shape) (headShapes, error) {
	if len(inputs) != s.inputCount() {
		return headShapes{}, fmt.Errorf("takes %d inputs (query, key, value, then the mask if configured), got %d", s.inputCount(), len(inputs))
	}
	for i, name := range []string{"query", "key", "value"} {
		if len(inputs[i]) != 4 {
			return headShapes{}, fmt.Errorf("%s has shape %s: want (B, H, T, head_dim)", name, fmtShape(inputs[i]))
		}
	}
	q, k, v := inputs[0], inputs[1], inputs[2]
	h := headShapes{B: q[0], H: q[1], KVH: k[1], Tq: q[2], Tk: k[2], E: q[3], Ev: v[3]}
	switch {
	case k[0] != h.B || v[0] != h.B:
		return h, fmt.Errorf("query, key and value have batch sizes %d, %d and %d: want one", h.B, k[0], v[0])
	case v[1] != h.KVH || v[2] != h.Tk:
		return h, fmt.Errorf("key has shape %s but value %s: want the same heads and keys", fmtShape(k), fmtShape(v))
	case k[3] != h.E:
		return h, fmt.Errorf("query has head_dim %d, key %d: want equal", h.E, k[3])
	case h.KVH == 0 || h.H%h.KVH != 0:
		return h, fmt.Errorf("query has %d heads, key and value %d: the key/value heads must divide the query heads", h.H, h.KVH)
	}
	if s.Mask != "" {
		return h, broadcastsTo("mask", inputs[3], []int{h.B, h.H, h.Tq, h.Tk})
	}
	return h, nil
}

// broadcastsTo checks that a shape broadcasts to target from the right, as
// broadcastMask reads it.
func broadcastsTo(name string, shape tensor.Shape, target []int) error {
	if len(shape) > len(target) {
		return fmt.Errorf("%s has shape %s: want at most %d dimensions, broadcastable to %s", name, fmtShape(shape), len(target), fmtShape(target))
	}
	for i := 1; i <= len(shape); i++ {
		if d := shape[len(shape)-i]; d != 1 && d != target[len(target)-i] {
			return fmt.Errorf("%s has shape %s, which does not broadcast to %s", name, fmtShape(shape), fmtShape(target))
		}
	}
	return nil
}

// OutputShape is (B, H, Tq, Ev).
func (s *ScaledDotProduct) OutputShape(inputs []tensor.Shape) (tensor.Shape, error) {
	h, err := s.shapes(inputs)
	if err != nil {
		return nil, err
	}
	return tensor.Shape{h.B, h.H, h.Tq, h.Ev}, nil
}

// FLOPs counts QKᵀ and weights·V, dense (see registry.FLOPCounter).
func (s *ScaledDotProduct) FLOPs(inputs []tensor.Shape) (int64, error) {
	h, err := s.shapes(inputs)
	if err != nil {
		return 0, err
	}
	var c flopCount
	c.attention(h.B, h.H, h.Tq, h.Tk, h.E, h.Ev)
	return c.result()
}

// Forward attends every query head over its key/value head.
func (s *ScaledDotProduct) Forward(run *registry.Run, inputs []*tensor.Dense) (*tensor.Dense, error) {
	if !s.ready {
		return nil, errNotValidated
	}
	shapes := make([]tensor.Shape, len(inputs))
	for i, x := range inputs {
		if x == nil || x.Dtype() != tensor.Float32 {
			return nil, fmt.Errorf("input %d: want a float32 tensor", i)
		}
		shapes[i] = x.Shape()
	}
	h, err := s.shapes(shapes)
	if err != nil {
		return nil, err
	}
	var data [3][]float32
	for i := range data {
		x, err := rowMajor([]string{"query", "key", "value"}[i], inputs[i])
		if err != nil {
			return nil, err
		}
		data[i] = x.Float32s()
	}
	scale := float32(s.Scale)
	if s.Scale == 0 {
		scale = invSqrt(h.E)
	}
	rule := scoreRule{scale: scale, causal: s.Causal, nanRows: s.nanRows}
	if s.mask != 0 {
		m, err := broadcastMask("mask", inputs[3], s.mask, h.B, h.H, h.Tq, h.Tk)
		if err != nil {
			return nil, err
		}
		rule.masks = []attn.Mask{m}
	}
	weights, err := newStepWeights(run, h.B, h.H, h.Tq, h.Tk)
	if err != nil {
		return nil, err
	}
	// The attention core reads tokens as rows with the heads side by side
	// (B·T, heads·dim): the (B, H, T, dim) inputs are copied so, and the
	// context vectors copied back.
	sc := getScratch(h.B*h.Tq*h.H*(h.E+h.Ev) + h.B*h.Tk*h.KVH*(h.E+h.Ev))
	defer sc.release()
	q := tokenMajor(sc.floats(h.B*h.Tq*h.H*h.E), data[0], h.B, h.H, h.Tq, h.E)
	k := tokenMajor(sc.floats(h.B*h.Tk*h.KVH*h.E), data[1], h.B, h.KVH, h.Tk, h.E)
	v := tokenMajor(sc.floats(h.B*h.Tk*h.KVH*h.Ev), data[2], h.B, h.KVH, h.Tk, h.Ev)
	ctx := sc.floats(h.B * h.Tq * h.H * h.Ev)
	a := attention{
		seqs: h.B, tq: h.Tq, tk: h.Tk, qHeads: h.H, kvHeads: h.KVH, dk: h.E, dv: h.Ev,
		q: q, ldq: h.H * h.E,
		keys: perSequence(k, h.B, h.Tk*h.KVH*h.E), values: perSequence(v, h.B, h.Tk*h.KVH*h.Ev),
		ldk: h.KVH * h.E, ldv: h.KVH * h.Ev,
		out: ctx, ldOut: h.H * h.Ev, rule: rule,
	}
	a.run(weightData(weights))
	out, y := run.Lender().Float32(h.B, h.H, h.Tq, h.Ev)
	headMajor(y, ctx, h.B, h.H, h.Tq, h.Ev)
	observe(run, weights)
	return out, nil
}

// tokenMajor copies x, (B, H, T, D), into dst as (B, T, H, D) and returns dst.
func tokenMajor(dst, x []float32, b, heads, t, d int) []float32 {
	swapAxes12(dst, x, b, heads, t, d)
	return dst
}

// headMajor copies x, (B, T, H, D), into dst as (B, H, T, D).
func headMajor(dst, x []float32, b, heads, t, d int) { swapAxes12(dst, x, b, t, heads, d) }

// swapAxes12 copies x, (B, N1, N2, D), into dst as (B, N2, N1, D).
func swapAxes12(dst, x []float32, b, n1, n2, d int) {
	for s := range b {
		for i := range n1 {
			for j := range n2 {
				from := ((s*n1+i)*n2 + j) * d
				to := ((s*n2+j)*n1 + i) * d
				copy(dst[to:to+d], x[from:from+d])
			}
		}
	}
}
