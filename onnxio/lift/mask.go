package lift

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/onnxio/match"
)

// maskKind says how a static value masks the scores.
type maskKind int

const (
	// maskWhereTrue: Where(cond, -inf, scores), masked where cond holds.
	maskWhereTrue maskKind = iota
	// maskWhereFalse: Where(cond, scores, -inf), masked where cond fails.
	maskWhereFalse
	// maskAdd: scores + m, masked where m is -inf, and m must be 0 elsewhere.
	maskAdd
)

// maskTerm is one static value that masks the scores.
type maskTerm struct {
	value string
	kind  maskKind
	// at is the scores value the term applies to when a Reshape that
	// regroups the leading axes lies between it and the product ((B, H,
	// T, S) against a (B·H, T, S) product); "" for the product's shape.
	at string
	// unscaled marks a term added after every scale of the scores.
	unscaled bool
}

// shapeAt is the shape a mask term broadcasts to at a probe: the product's
// (scores), or that of the reshaped scores it is applied to, whose
// elements are the product's in the same order.
func (term maskTerm) shapeAt(p *probe, scores []int) ([]int, error) {
	if term.at == "" {
		return scores, nil
	}
	s, err := p.shape(term.at)
	if err != nil {
		return nil, err
	}
	if product(s) != product(scores) || len(s) < 2 || s[len(s)-1] != scores[len(scores)-1] || s[len(s)-2] != scores[len(scores)-2] {
		return nil, fmt.Errorf("the mask %q applies to scores of shape %s, which are not the product's %s regrouped", term.value, fmtShape(s), fmtShape(scores))
	}
	return s, nil
}

// masked is how low a score must be pushed to count as masked: -inf, or a
// number like -1e9, finfo(float32).min or Hugging Face's -10000 (GPT-2's
// masked_bias, BERT's (1 - mask) * -10000). Softmax turns a score that far
// below the row's largest into an exact 0 in float32, as -inf would; a row
// whose every key is masked differs (uniform weights instead of none), and
// the lifted model is checked against the graph.
const masked = -1e4

// maskAt evaluates the mask terms at a probe and broadcasts them to the
// scores' shape: the result is true where a score is masked out. A term
// that does not broadcast to the scores, or adds something other than 0 or
// -inf, is an error.
func (a *analysis) maskAt(p *probe, terms []maskTerm, scores []int) ([]bool, error) {
	out := make([]bool, product(scores))
	for _, term := range terms {
		t, err := p.value(term.value)
		if err != nil {
			return nil, err
		}
		target, err := term.shapeAt(p, scores)
		if err != nil {
			return nil, err
		}
		shape := []int(t.Shape())
		if t.IsScalar() {
			shape = nil
		}
		if !broadcasts(shape, target) {
			return nil, fmt.Errorf("mask %q of shape %s does not fit the scores of shape %s", term.value, fmtShape(shape), fmtShape(target))
		}
		vals, err := match.Floats(t)
		if err != nil {
			return nil, err
		}
		for i := range out {
			x := vals[broadcastIndex(i, target, shape)]
			switch term.kind {
			case maskWhereTrue:
				out[i] = out[i] || x != 0
			case maskWhereFalse:
				out[i] = out[i] || x == 0
			case maskAdd:
				if x <= masked {
					out[i] = true
				} else if x != 0 {
					return nil, fmt.Errorf("%q adds %g to some scores: a score bias, not a mask", term.value, x)
				}
			}
		}
	}
	return out, nil
}

// broadcasts reports whether shape broadcasts to target without changing it.
func broadcasts(shape, target []int) bool {
	if len(shape) > len(target) {
		return false
	}
	off := len(target) - len(shape)
	for i, d := range shape {
		if d != 1 && d != target[off+i] {
			return false
		}
	}
	return true
}

// broadcastIndex maps a flat index of target to the flat index of the
// broadcast operand of the given shape.
func broadcastIndex(i int, target, shape []int) int {
	off := len(target) - len(shape)
	idx, stride := 0, 1
	for k := len(target) - 1; k >= off; k-- {
		coord := i % target[k]
		i /= target[k]
		d := shape[k-off]
		if d != 1 {
			idx += coord * stride
		}
		stride *= d
	}
	return idx
}

// causality classifies a mask over scores (..., Tq, Tk): no position
// masked, or exactly the future (key after query) masked in every group.
func causality(m []bool, scores []int) (causal bool, err error) {
	n := len(scores)
	Tq, Tk := scores[n-2], scores[n-1]
	any := false
	for _, x := range m {
		any = any || x
	}
	if !any {
		return false, nil
	}
	if Tq != Tk {
		return false, fmt.Errorf("the scores are %d×%d and masked: not a causal self-attention mask", Tq, Tk)
	}
	for i, x := range m {
		q, k := (i/Tk)%Tq, i%Tk
		if x != (k > q) {
			state := "masked"
			if !x {
				state = "visible"
			}
			return false, fmt.Errorf("the mask is not causal: query %d, key %d is %s", q, k, state)
		}
	}
	return true, nil
}

// maskBuffer finds the fixed-size buffer a causal mask is cut from (the
// register_buffer("mask", ...) of the seed modules): the largest square
// (C, C) initializer or Constant the mask terms are computed from. It
// returns 0 when the mask is built from the sequence length alone (Range,
// Trilu), which bounds nothing.
func (a *analysis) maskBuffer(terms []maskTerm) int {
	best := 0
	seen := map[string]bool{}
	var walk func(v string)
	walk = func(v string) {
		if v == "" || seen[v] || a.g.IsData(v) {
			return
		}
		seen[v] = true
		n := a.g.Producer(v)
		if n == nil || n.GetOpType() == "Constant" {
			if t, err := a.probes[0].value(v); err == nil && t.Dims() >= 2 {
				s := t.Shape()
				if r, c := s[len(s)-2], s[len(s)-1]; r == c && r > 1 {
					best = max(best, r)
				}
			}
			return
		}
		if n.GetOpType() == "Shape" {
			return
		}
		for _, in := range n.GetInput() {
			walk(in)
		}
	}
	for _, t := range terms {
		walk(t.value)
	}
	return best
}

// isMaskFill reports whether a static scalar fills masked scores.
func (a *analysis) isMaskFill(v string) bool {
	f, ok := a.probes[0].scalar(v)
	return ok && (f <= masked || math.IsInf(f, -1))
}

// uniformShift reports whether the mask is one static term added to the
// scaled scores that adds one finite number to every score at a probe, and
// returns it: an attention_mask of zeros folded into the graph (ONNX
// Runtime's fusion tests), every key hidden alike. The softmax is the same
// but for rounding, which the shift decides, so the lifted attention adds
// it too (score_mod shift).
func (a *analysis) uniformShift(p *probe, terms []maskTerm, scores []int) (float64, bool) {
	if len(terms) != 1 || terms[0].kind != maskAdd || !terms[0].unscaled {
		return 0, false
	}
	t, err := p.value(terms[0].value)
	if err != nil {
		return 0, false
	}
	target, err := terms[0].shapeAt(p, scores)
	shape := []int(t.Shape())
	if t.IsScalar() {
		shape = nil
	}
	if err != nil || !broadcasts(shape, target) {
		return 0, false
	}
	vals, err := match.Floats(t)
	if err != nil || len(vals) == 0 || vals[0] == 0 || math.IsInf(vals[0], 0) || math.IsNaN(vals[0]) {
		return 0, false
	}
	for _, x := range vals {
		if x != vals[0] {
			return 0, false
		}
	}
	return vals[0], true
}
