package layers

import (
	"fmt"
	"slices"

	"github.com/attnrun/attnrun/onnxio/match"
)

// GPT-J's rotary embedding in ONNX graphs: the heads are rotated while
// still laid out (B, T, H, d), before the Transpose that brings the heads
// forward, and only their first rotary_dim features, in interleaved pairs:
//
//	rot  = x[…, :rotary_dim]
//	rot' = rot·cos + rotate_every_two(rot)·sin
//	q    = Transpose(Concat(rot', x[…, rotary_dim:]), (0, 2, 1, 3))
//
// where rotate_every_two(r) = Reshape(Concat(Unsqueeze(−r[…, 1::2]),
// Unsqueeze(r[…, 0::2])) on a new last axis) and cos, sin repeat each
// pair's value twice (repeat_interleave). The rotation acts on the last
// axis alone, with tables that vary by position only, so rotating before
// or after the Transpose is the same: it is attention.sdpa's rope:
// interleaved with rope_rotary_dim.

// unrotatedEveryTwo returns the heads x, (B, T, H, d) as projected, that v,
// heads (B, H, T, d), rotates as GPT-J writes its rotation, and the
// rotation (tokens set: x is not yet transposed); "" and nil when v is
// not computed so.
func unrotatedEveryTwo(g match.Graph, v string) (string, *sdpaRope, error) {
	tr := g.Producer(throughCopies(g, v))
	if tr == nil || tr.Op() != "Transpose" || !slices.Equal(tr.Ints("perm"), []int64{0, 2, 1, 3}) {
		return "", nil, nil
	}
	rotated, whole := tr.Inputs()[0], ""
	if cat := g.Producer(rotated); cat != nil && cat.Op() == "Concat" && len(cat.Inputs()) == 2 {
		w, err := sliceSource(g, cat.Inputs()[1])
		if err != nil || !lastAxis(g, cat) {
			return "", nil, nil
		}
		rotated, whole = cat.Inputs()[0], w
	}
	x, cos, sin, style := rotationSum(g, rotated, func(rot, x string) string {
		if isRotatePairs(g, rot, x) {
			return "interleaved"
		}
		return ""
	})
	if style == "" {
		return "", nil, nil
	}
	shape, err := g.Shape(x)
	if err != nil || len(shape) != 4 || shape[3]%2 != 0 {
		return "", nil, fmt.Errorf("the rotated heads %q are not (B, T, H, rotary_dim)", x)
	}
	if whole == "" {
		whole = x
	} else if from, err := sliceSource(g, x); err != nil || from != whole {
		return "", nil, fmt.Errorf("the partial rotation of %q joins other heads than it rotates", v)
	}
	base, err := everyTwoBase(g, cos, sin, x)
	if err != nil {
		return "", nil, err
	}
	return whole, &sdpaRope{style: "interleaved", base: base, dim: shape[3], tokens: true}, nil
}

// everyTwoBase reads the base of an interleaved rotation of x, (B, T, H,
// rotary_dim), from its cos and sin tables: at every probe, the angle of
// features 2i and 2i+1 at position t must be t·base^(−2i/rotary_dim), the
// base read from the first probe's position 1, pair 1.
func everyTwoBase(g match.Graph, cosV, sinV, x string) (float64, error) {
	base := 0.0
	for p := range g.Probes() {
		shape, err := g.ShapeAt(p, x)
		if err != nil || len(shape) != 4 {
			return 0, fmt.Errorf("the rotated heads %q are not (B, T, H, rotary_dim)", x)
		}
		T, d := shape[1], shape[3]
		if base, err = ropeBase(g, p, cosV, sinV, T, d, d, everyPair, "tables", base); err != nil {
			return 0, err
		}
	}
	return base, nil
}

// everyTwoAngleBase reads the base of interleaved tables, (T, d), from
// the angle of pair 1 at position 1.
func everyTwoAngleBase(cos, sin []float64, T, d int) (float64, error) {
	return angleBase(cos, sin, T, d, d, everyPair)
}

// projectedTokenHeads reads heads (B, T, H, d) split from an nn.Linear
// of the input by a Reshape, as GPT-J rotates them before their
// Transpose; it returns the projection, H and d.
func projectedTokenHeads(g match.Graph, heads, what string) (*match.Linear, int, int, error) {
	reshape := g.Producer(heads)
	shape, err := g.Shape(heads)
	if reshape == nil || reshape.Op() != "Reshape" || err != nil || len(shape) != 4 {
		return nil, 0, 0, fmt.Errorf("the rotated %s (%q) are not heads (B, T, H, d) split from a projection", what, heads)
	}
	l, ok := g.Linear(reshape.Inputs()[0])
	if !ok || l.Out != shape[2]*shape[3] {
		return nil, 0, 0, fmt.Errorf("the rotated %s (%q) are not an nn.Linear of the input split into %d heads of %d", what, reshape.Inputs()[0], shape[2], shape[3])
	}
	return l, shape[2], shape[3], nil
}
