package layers

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/onnxio/match"
)

// Hugging Face's RoPE in ONNX graphs: x·cos + rotate_half(x)·sin, where
// rotate_half(x) = Concat(−x[…, d/2:], x[…, :d/2]) (rope: half), or, for
// interleaved pairs (Cohere, GPT-J), stack(−x[…, 1::2], x[…, ::2])
// flattened (rope: interleaved, whose tables repeat each angle twice in a
// row); cos and sin are tables computed from the positions and inv_freq
// (static at every probe: the positions of a fresh sequence follow from
// its length). The base is read from the tables' angles at position 1,
// θ_i = base^(−2i/d), and every position's angles are checked against it.
// Float32 copies around the rotation (ModernBERT's q.float() and
// .to(original_dtype), which the TorchScript exporter writes as Casts to
// float32) are seen through.

func init() {
	match.RegisterRotation("hugging face", readHFRotation)
}

// readHFRotation offers Hugging Face's RoPE, whole or partial, to the
// lifter of ONNX's Attention op (match.RegisterRotation).
func readHFRotation(g match.Graph, v string) (*match.Rotation, error) {
	x, r, err := unrotatedHalf(g, v)
	if r == nil && err == nil {
		x, r, err = unrotatedPartialHalf(g, v)
	}
	if r == nil || err != nil {
		return nil, err
	}
	return &match.Rotation{Heads: x, Rope: match.Rope{Interleaved: r.style == "interleaved", Base: r.base, Dim: r.dim}}, nil
}

// unrotatedHalf returns the heads x that v rotates as Hugging Face writes
// RoPE, and the rotation; "" and nil when v is not rotated so.
func unrotatedHalf(g match.Graph, v string) (string, *sdpaRope, error) {
	x, cos, sin, style := rotationSum(g, throughCopies(g, v), func(rot, x string) string {
		switch {
		case isRotatePairs(g, rot, x):
			return "interleaved"
		case isRotateHalf(g, rot, x):
			return "half"
		}
		return ""
	})
	if style == "" {
		return "", nil, nil
	}
	shape, err := g.Shape(x)
	if err != nil || len(shape) != 4 || shape[3]%2 != 0 {
		return "", nil, fmt.Errorf("the rotated heads %q are not (B, H, T, head_dim)", x)
	}
	base, err := ropeTableBase(g, cos, sin, shape[2], shape[3], style == "interleaved")
	if err != nil {
		return "", nil, err
	}
	return x, &sdpaRope{style: style, base: base, dim: shape[3]}, nil
}

// rotationSum reads v as RoPE's x·cos + rotate(x)·sin, Add(Mul(x, cos),
// Mul(rot, sin)) with the products in either order and each with its
// static table on either side: x (through float32 copies), the tables and
// the style rotated names for how rot rotates x; style "" when v is not
// such a sum.
func rotationSum(g match.Graph, v string, rotated func(rot, x string) string) (x, cos, sin, style string) {
	add := g.Producer(v)
	if add == nil || add.Op() != "Add" || len(add.Inputs()) != 2 {
		return "", "", "", ""
	}
	for k := range 2 {
		cosMul, sinMul := g.Producer(add.Inputs()[k]), g.Producer(add.Inputs()[1-k])
		if cosMul == nil || sinMul == nil || cosMul.Op() != "Mul" || sinMul.Op() != "Mul" {
			continue
		}
		x, cos, ok1 := dataAndStatic(g, cosMul)
		rot, sin, ok2 := dataAndStatic(g, sinMul)
		if !ok1 || !ok2 {
			continue
		}
		x = throughCopies(g, x)
		if style := rotated(rot, x); style != "" {
			return x, cos, sin, style
		}
	}
	return "", "", "", ""
}

// unrotatedPartialHalf returns the heads x that v rotates in part as
// Hugging Face writes a partial rotation (GPT-NeoX's rotary_pct):
// Concat(rope(x[…, :dim]), x[…, dim:]) on the last axis, rope as
// unrotatedHalf reads it or ONNX's RotaryEmbedding (unrotatedOp); the
// rotation's dim is the rotated features'.
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
	if r == nil && err == nil {
		x, r, err = unrotatedOp(g, cat.Inputs()[0]) // the dynamo exporter at opset 23
	}
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
	if err != nil || throughCopies(g, hi) != x {
		return false
	}
	lo, err := sliceSource(g, cat.Inputs()[1])
	if err != nil || throughCopies(g, lo) != x {
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

// isRotatePairs reports whether rot is the rotation of x's interleaved
// pairs as Cohere and GPT-J write it: stack(−x[…, 1::2], x[…, ::2],
// dim=−1) flattened back to x's shape, that is Reshape(Concat(
// Unsqueeze(Neg(odd)), Unsqueeze(even)) on a new last axis).
func isRotatePairs(g match.Graph, rot, x string) bool {
	flat := g.Producer(rot)
	if flat == nil || flat.Op() != "Reshape" || !sameShapes(g, rot, x) {
		return false
	}
	stack := g.Producer(flat.Inputs()[0])
	if stack == nil || stack.Op() != "Concat" || len(stack.Inputs()) != 2 {
		return false
	}
	shape, err := g.Shape(stack.Output())
	if axis := stack.Int("axis", 0); err != nil || axis != -1 && int(axis) != len(shape)-1 {
		return false
	}
	var sliced [2]string
	for k, v := range stack.Inputs() {
		unsq := g.Producer(v)
		if unsq == nil || unsq.Op() != "Unsqueeze" || len(unsq.Inputs()) != 2 {
			return false
		}
		if axis, ok := g.Scalar(unsq.Inputs()[1]); !ok || axis != -1 && int(axis) != len(shape)-1 {
			return false
		}
		sliced[k] = unsq.Inputs()[0]
	}
	neg := g.Producer(sliced[0])
	if neg == nil || neg.Op() != "Neg" {
		return false
	}
	return isEverySecond(g, neg.Inputs()[0], x, 1) && isEverySecond(g, sliced[1], x, 0)
}

// isEverySecond reports whether v is x[…, start::2], a Slice of x's last
// axis (through float32 copies) from start in steps of 2.
func isEverySecond(g match.Graph, v, x string, start float64) bool {
	src, err := sliceSource(g, v)
	if err != nil || throughCopies(g, src) != x {
		return false
	}
	ins := g.Producer(v).Inputs()
	from, ok1 := g.Scalar(ins[1])
	if len(ins) < 5 {
		return false
	}
	step, ok2 := g.Scalar(ins[4])
	return ok1 && ok2 && from == start && step == 2
}

// ropeTableBase reads the base of the rotation from Hugging Face's cos and
// sin tables at the first probe, broadcast to (…, T, d): the angle of pair
// i at position t must be t·base^(−2i/d), both halves alike, or, with
// interleaved pairs, both features of the pair (repeat_interleave).
func ropeTableBase(g match.Graph, cosV, sinV string, T, d int, interleaved bool) (float64, error) {
	pair := func(i int) int { return i % (d / 2) }
	if interleaved {
		pair = everyPair
	}
	return ropeBase(g, 0, cosV, sinV, T, d, d, pair, "tables", 0)
}

// ropeCacheBase reads the base of the rotation from RotaryEmbedding's cos
// and sin caches at the first probe, (…, T, d/2): the angle of pair i at
// position t must be t·base^(−2i/d).
func ropeCacheBase(g match.Graph, cosV, sinV string, T, d int) (float64, error) {
	return ropeBase(g, 0, cosV, sinV, T, d, d/2, func(i int) int { return i }, "caches", 0)
}

// everyPair is the pair of feature i when pairs are interleaved: features
// 2i and 2i+1 share an angle (repeat_interleave).
func everyPair(i int) int { return i / 2 }

// ropeBase reads the base from cos and sin values of T rows of width
// features each (d for tables that repeat the d/2 angles, d/2 for caches
// that hold them once) at probe p, feature i holding the angle of
// pair(i), then checks every angle against it; what names the values in
// errors. A base other than 0 is checked instead of read (a later probe's
// values against the first's).
func ropeBase(g match.Graph, p int, cosV, sinV string, T, d, width int, pair func(int) int, what string, base float64) (float64, error) {
	read := func(v string) ([]float64, error) {
		t, err := g.ValueAt(p, v)
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
	if base == 0 {
		if base, err = angleBase(cos, sin, T, d, width, pair); err != nil {
			return 0, fmt.Errorf("the RoPE %s %q and %q: %w", what, cosV, sinV, err)
		}
	}
	for t := range T {
		for i := range width {
			angle := float64(t) * math.Pow(base, -2*float64(pair(i))/float64(d))
			if math.Abs(cos[t*width+i]-math.Cos(angle)) > 1e-4 || math.Abs(sin[t*width+i]-math.Sin(angle)) > 1e-4 {
				return 0, fmt.Errorf("the RoPE %s %q and %q are not cos and sin of position·base^(−2i/d) at position %d, feature %d (base %g)", what, cosV, sinV, t, i, base)
			}
		}
	}
	return base, nil
}

// angleBase reads the base from the angle of pair 1 at position 1 of cos
// and sin values of T rows of width features, feature i holding the angle
// of pair(i); one pair turns by its position whatever the base, which is
// then 10000.
func angleBase(cos, sin []float64, T, d, width int, pair func(int) int) (float64, error) {
	if T < 2 {
		return 0, fmt.Errorf("they cover %d position(s); reading the base takes 2", T)
	}
	if d/2 < 1 {
		return 0, fmt.Errorf("they rotate heads of %d feature(s); a rotation turns pairs", d)
	}
	if d/2 == 1 {
		return 10000, nil
	}
	one := 0 // the feature of pair 1
	for one+1 < width && pair(one) != 1 {
		one++
	}
	theta1 := math.Atan2(sin[width+one], cos[width+one])
	base := math.Pow(theta1, -float64(d)/2)
	if r := math.Round(base); math.Abs(base-r) < 1e-4*base {
		base = r
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
