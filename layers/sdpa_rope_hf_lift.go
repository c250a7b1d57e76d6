package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/onnxio/match"
)

// Hugging Face's RoPE in ONNX graphs: x·cos + rotate_half(x)·sin, where
// rotate_half(x) = Concat(−x[…, d/2:], x[…, :d/2]) and cos, sin are
// tables computed from the positions and inv_freq (static at every
// probe: the positions of a fresh sequence follow from its length). The
// rotation is attention.sdpa's rope: half; the base is read from the
// tables' angles at position 1, θ_i = base^(−2i/d), and every position's
// angles are checked against it.

// unrotatedHalf returns the heads x that v rotates as Hugging Face writes
// RoPE, and the rotation; "" and nil when v is not rotated so.
func unrotatedHalf(g match.Graph, v string) (string, *sdpaRope, error) {
	add := g.Producer(throughCopies(g, v))
	if add == nil || add.Op() != "Add" || len(add.Inputs()) != 2 {
		return "", nil, nil
	}
	for k := range 2 {
		cosMul, sinMul := g.Producer(add.Inputs()[k]), g.Producer(add.Inputs()[1-k])
		if cosMul == nil || sinMul == nil || cosMul.Op() != "Mul" || sinMul.Op() != "Mul" {
			continue
		}
		x, cos, ok := dataAndStatic(g, cosMul)
		if !ok {
			continue
		}
		rot, sin, ok := dataAndStatic(g, sinMul)
		if !ok || !isRotateHalf(g, rot, x) {
			continue
		}
		shape, err := g.Shape(x)
		if err != nil || len(shape) != 4 || shape[3]%2 != 0 {
			return "", nil, fmt.Errorf("the rotated heads %q are not (B, H, T, head_dim)", x)
		}
		base, err := ropeTableBase(g, cos, sin, shape[2], shape[3])
		if err != nil {
			return "", nil, err
		}
		return x, &sdpaRope{style: "half", base: base, dim: shape[3]}, nil
	}
	return "", nil, nil
}

// unrotatedPartialHalf returns the heads x that v rotates in part as
// Hugging Face writes a partial rotation (GPT-NeoX's rotary_pct):
// Concat(rope(x[…, :dim]), x[…, dim:]) on the last axis, rope as
// unrotatedHalf reads it; the rotation's dim is the rotated features'.
// "" and nil when v is not rotated so.
func unrotatedPartialHalf(g match.Graph, v string) (string, *sdpaRope, error) {
	cat := g.Producer(throughCopies(g, v))
	if cat == nil || cat.Op() != "Concat" || len(cat.Inputs()) != 2 {
		return "", nil, nil
	}
	shape, err := g.Shape(v)
	if axis := cat.Int("axis", 0); err != nil || axis != -1 && int(axis) != len(shape)-1 {
		return "", nil, nil
	}
	whole, err := sliceSource(g, cat.Inputs()[1])
	if err != nil {
		return "", nil, nil
	}
	x, r, err := unrotatedHalf(g, cat.Inputs()[0])
	if r == nil || err != nil {
		return "", nil, err
	}
	if from, err := sliceSource(g, x); err != nil || from != whole {
		return "", nil, fmt.Errorf("the partial rotation of %q joins other heads than it rotates", v)
	}
	return whole, r, nil
}

// isRotateHalf reports whether rot is Concat(−x[…, d/2:], x[…, :d/2])
// along the last axis.
func isRotateHalf(g match.Graph, rot, x string) bool {
	cat := g.Producer(rot)
	if cat == nil || cat.Op() != "Concat" || len(cat.Inputs()) != 2 {
		return false
	}
	neg := g.Producer(cat.Inputs()[0])
	if neg == nil || neg.Op() != "Neg" {
		return false
	}
	hi, err := sliceSource(g, neg.Inputs()[0])
	if err != nil || hi != x {
		return false
	}
	lo, err := sliceSource(g, cat.Inputs()[1])
	if err != nil || lo != x {
		return false
	}
	xs, err := g.Shape(x)
	if err != nil {
		return false
	}
	his, err1 := g.Shape(neg.Inputs()[0])
	los, err2 := g.Shape(cat.Inputs()[1])
	if err1 != nil || err2 != nil || len(xs) == 0 {
		return false
	}
	half := xs[len(xs)-1] / 2
	// Which half each slice holds is checked by the self-check; here only
	// that they are halves.
	return his[len(his)-1] == half && los[len(los)-1] == half
}

// ropeTableBase reads the base of the rotation from Hugging Face's cos and
// sin tables at the first probe, broadcast to (…, T, d): the angle of pair
// i at position t must be t·base^(−2i/d), both halves alike.
func ropeTableBase(g match.Graph, cosV, sinV string, T, d int) (float64, error) {
	return ropeBase(g, cosV, sinV, T, d, d, "tables")
}

// ropeCacheBase reads the base of the rotation from RotaryEmbedding's cos
// and sin caches at the first probe, (…, T, d/2): the angle of pair i at
// position t must be t·base^(−2i/d).
func ropeCacheBase(g match.Graph, cosV, sinV string, T, d int) (float64, error) {
	return ropeBase(g, cosV, sinV, T, d, d/2, "caches")
}

// ropeBase reads the base from cos and sin values of T rows of width
// features each (d for tables that repeat the d/2 angles, d/2 for caches
// that hold them once), then checks every angle against it; what names
// the values in errors.
func ropeBase(g match.Graph, cosV, sinV string, T, d, width int, what string) (float64, error) {
	read := func(v string) ([]float64, error) {
		t, err := g.ValueAt(0, v)
		if err != nil {
			return nil, err
		}
		f, err := match.Floats(t)
		if err != nil || len(f) != T*width { // one table for every head and sequence
			return nil, fmt.Errorf("the RoPE %s %q has %d values, want %d×%d", what, v, len(f), T, width)
		}
		return f, nil
	}
	cos, err := read(cosV)
	if err != nil {
		return 0, err
	}
	sin, err := read(sinV)
	if err != nil {
		return 0, err
	}
	if T < 2 {
		return 0, fmt.Errorf("the RoPE %s cover %d position(s); reading the base takes 2", what, T)
	}
	half := d / 2
	if half < 1 {
		return 0, fmt.Errorf("the RoPE %s rotate heads of %d feature(s); a rotation turns pairs", what, d)
	}
	base := 10000.0
	if half > 1 {
		theta1 := math.Atan2(sin[width+1], cos[width+1]) // position 1, pair 1
		base = math.Pow(theta1, -float64(d)/2)
		if r := math.Round(base); math.Abs(base-r) < 1e-4*base {
			base = r
		}
	}
	for t := range T {
		for i := range width {
			angle := float64(t) * math.Pow(base, -2*float64(i%half)/float64(d))
			if math.Abs(cos[t*width+i]-math.Cos(angle)) > 1e-4 || math.Abs(sin[t*width+i]-math.Sin(angle)) > 1e-4 {
				return 0, fmt.Errorf("the RoPE %s %q and %q are not cos and sin of position·base^(−2i/d) at position %d, feature %d (base %g)", what, cosV, sinV, t, i, base)
			}
		}
	}
	return base, nil
}

// throughCopies follows v back through Identity nodes (a KV cache's
// Concat becomes one when the lifter splits the past off, onnxio/lift's
// kvcache.go, between the new keys or values and the attention) and
// Casts of float32 to float32 (Hugging Face casts rotated heads and
// normalized values back to the input's type).
func throughCopies(g match.Graph, v string) string {
	for n := g.Producer(v); n != nil && (n.Op() == "Identity" || match.IsFloatCopy(g, n)); n = g.Producer(v) {
		v = n.Inputs()[0]
	}
	return v
}

// unrotatedOp returns the heads x that v rotates by ONNX's RotaryEmbedding
// op (opset 23) on 4-D (B, H, T, head_dim) heads, not interleaved, over
// the whole head, with cos and sin caches of (…, T, head_dim/2) and no
// position ids (Gemma 2 through the dynamo exporter at opset 23): the
// rotation of attention.sdpa's rope: half, its base read from the caches
// as ropeTableBase reads Hugging Face's tables. "" and nil when v is not
// computed so.
func unrotatedOp(g match.Graph, v string) (string, *sdpaRope, error) {
	n := g.Producer(throughCopies(g, v))
	if n == nil || n.Op() != "RotaryEmbedding" {
		return "", nil, nil
	}
	ins := n.Inputs()
	x := ins[0]
	shape, err := g.Shape(x)
	switch {
	case err != nil || len(shape) != 4 || shape[3]%2 != 0:
		return "", nil, fmt.Errorf("the RotaryEmbedding %s rotates %q, not (B, H, T, head_dim) heads", n.Name(), x)
	case len(ins) != 3 || n.Int("interleaved", 0) != 0 || n.Int("rotary_embedding_dim", 0) != 0 && int(n.Int("rotary_embedding_dim", 0)) != shape[3]:
		return "", nil, fmt.Errorf("the RotaryEmbedding %s takes position ids, rotates interleaved pairs or part of the heads; attention.sdpa's rope: half rotates whole heads by position", n.Name())
	}
	base, err := ropeCacheBase(g, ins[1], ins[2], shape[2], shape[3])
	if err != nil {
		return "", nil, err
	}
	return x, &sdpaRope{style: "half", base: base, dim: shape[3]}, nil
}
