package layers

import (
	"math"

	"github.com/attnrun/attnrun/registry"
)

var _ registry.Exporter = (*LinearAttention)(nil)

// deltaExportLevels is how many levels of block inversion the exported
// delta rules unroll: they solve a triangular system of T unknowns in
// ⌈log₂ T⌉ levels, so the graph takes up to 2¹² = 4096 tokens and fails on
// longer sequences (a Gather out of its position table) rather than
// computing something else.
const deltaExportLevels = 12

// linearAttentionOpset is the first opset with ONNX's LinearAttention op.
const linearAttentionOpset = 27

// ExportONNX writes the layer in standard ops: before opset 27 in ops that
// every opset from 13 on has, and that attnrun's executor and ONNX Runtime
// both run; from opset 27 on with ONNX's LinearAttention op, which computes
// the recurrence itself (ONNX Runtime 1.31.1 refuses opset-27 models;
// attnrun's executor runs them). Before the recurrence: the projections,
// the causal convolution as kernel shifted Slices of a zero-padded Concat
// times the weight columns, SiLU as x·Sigmoid(x), the L2 norms (ReduceSum,
// Sqrt, Div), the gates (Sigmoid; softplus written out with a log1p that
// keeps small values); after it the gated RMSNorm and out_proj.
func (l *LinearAttention) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
	c := l.c
	if c == nil {
		return "", errNotValidated
	}
	x, err := oneONNXInput(inputs)
	if err != nil {
		return "", err
	}
	mixed, z := c.projectONNX(g, x)
	mixed = c.convolveONNX(g, x, mixed)
	var o string // (B, T, H, dv)
	if g.Opset() >= linearAttentionOpset {
		o = c.linearAttentionOpONNX(g, x, mixed)
	} else {
		o = c.parallelFormONNX(g, x, mixed)
	}
	o = c.normGateONNX(g, o, z)
	o = g.Node("Reshape", operands(o, g.ConstInt64([]int64{0, 0, int64(c.valueDim)})))
	return linearONNX(g, c.out, "out_proj", o), nil
}

// linearAttentionOpONNX writes ONNX's LinearAttention over the convolved
// queries, keys and values mixed (B, T, conv_dim) and returns its output
// as heads (B, T, H, dv). The op's key-value heads are the layer's value
// heads: the queries and keys, L2-normalized where the rule says so, are
// repeated for them, since the op groups queries over key-value heads and
// the layer groups value heads over key heads. The op's decay and beta are
// per head (B, T, H), its scale 1/√head_k_dim.
func (c *linearPrepared) linearAttentionOpONNX(g registry.GraphBuilder, x, mixed string) string {
	q := c.opKeysONNX(g, sliceLastONNX(g, mixed, 0, int64(c.keyDim)))
	k := c.opKeysONNX(g, sliceLastONNX(g, mixed, int64(c.keyDim), int64(2*c.keyDim)))
	v := sliceLastONNX(g, mixed, int64(2*c.keyDim), int64(c.convDim))
	beta, logDecay := c.gatesONNX(g, x)
	in := operands(q, k, v)
	switch {
	case c.rule.delta:
		in = append(in, "", logDecay, beta) // logDecay "" for the delta rule
	case c.rule.gated:
		in = append(in, "", logDecay)
	}
	y := g.Node("LinearAttention", in,
		registry.IntAttr("q_num_heads", int64(c.heads)), registry.IntAttr("kv_num_heads", int64(c.heads)),
		registry.StringAttr("update_rule", c.rule.name()), registry.FloatAttr("scale", invSqrt(c.dk)))
	return g.Node("Reshape", operands(y, g.ConstInt64([]int64{0, 0, int64(c.heads), int64(c.dv)})))
}

// opKeysONNX turns queries or keys (B, T, key_dim) into LinearAttention's
// (B, T, H·dk): each key head L2-normalized where the rule says so, then
// repeated for its group of value heads.
func (c *linearPrepared) opKeysONNX(g registry.GraphBuilder, x string) string {
	if !c.l2norm && c.group == 1 {
		return x
	}
	x = g.Node("Reshape", operands(x, g.ConstInt64([]int64{0, 0, int64(c.keyHeads), int64(c.dk)})))
	if c.l2norm {
		x = l2NormONNX(g, x)
	}
	if c.group > 1 {
		x = g.Node("Unsqueeze", operands(x, g.ConstInt64([]int64{3}))) // (B, T, key heads, 1, dk)
		x = g.Node("Expand", operands(x, g.ConstInt64([]int64{1, 1, 1, int64(c.group), 1})))
	}
	return g.Node("Reshape", operands(x, g.ConstInt64([]int64{0, 0, int64(c.heads * c.dk)})))
}

// parallelFormONNX writes the recurrence in standard ops and returns its
// output as heads (B, T, H, dv). A Loop or Scan over the tokens would need
// control flow, which attnrun's executor does not run, so the recurrence is
// written in its parallel form over the whole sequence, the form the
// chunked algorithms use within a chunk (here one chunk of all T tokens):
//
//	G = cumsum(g) (in float64, a MatMul by a triangle of ones),  D_ij = exp(G_i − G_j) for j ≤ i, else 0
//	linear, gated:  O = ((Q Kᵀ) ⊙ D) V                  (D the causal triangle of ones without decay)
//	delta rules:    O = ((Q Kᵀ) ⊙ D) U,  (I + A) U = diag(β) V,  A = strictly lower (diag(β) K Kᵀ ⊙ D)
//
// with the unit lower triangular system solved by block inversion: the
// inverse of the diagonal blocks of size 2ʲ gives that of size 2ʲ⁺¹ by
// X = X − X A_j X, A_j the blocks' lower-left quarters of A, over
// deltaExportLevels levels. Each level is two T×T×T products per value
// head, so a delta rule's graph costs O(T³ log T), against O(T) for the
// recurrence: the export is exact (within 7e-7 of the recurrence at 1000
// tokens), and meant for cross-checks and short sequences.
func (c *linearPrepared) parallelFormONNX(g registry.GraphBuilder, x, mixed string) string {
	q := splitHeadsONNX(g, sliceLastONNX(g, mixed, 0, int64(c.keyDim)), c.keyHeads, c.dk)
	k := splitHeadsONNX(g, sliceLastONNX(g, mixed, int64(c.keyDim), int64(2*c.keyDim)), c.keyHeads, c.dk)
	v := splitHeadsONNX(g, sliceLastONNX(g, mixed, int64(2*c.keyDim), int64(c.convDim)), c.heads, c.dv)
	if c.l2norm {
		q, k = l2NormONNX(g, q), l2NormONNX(g, k)
	}
	q = g.Node("Mul", operands(q, g.ScalarFloat(invSqrt(c.dk))))
	if c.group > 1 {
		q = repeatHeadsONNX(g, q, c.keyHeads, c.heads, c.dk)
		k = repeatHeadsONNX(g, k, c.keyHeads, c.heads, c.dk)
	}

	contextLength := 0
	if c.rule.delta {
		contextLength = 1 << deltaExportLevels
	}
	pos := positionsONNX(g, x, contextLength)
	tri := linearTriangles(g, pos)
	beta, logDecay := c.gatesONNX(g, x)
	headsFirst := registry.IntsAttr("perm", 0, 2, 1) // (B, T, H) → (B, H, T)
	decay := tri.causalF
	if c.rule.gated {
		decay = tri.decayONNX(g, g.Node("Transpose", operands(logDecay), headsFirst))
	}
	scores := g.Node("Mul", operands(g.Node("MatMul", operands(q, transposeLastTwo(g, k))), decay))
	values := v
	if c.rule.delta {
		beta = g.Node("Transpose", operands(beta), headsFirst)
		beta = g.Node("Unsqueeze", operands(beta, g.ConstInt64([]int64{-1}))) // (B, H, T, 1)
		values = tri.deltaValuesONNX(g, k, v, beta, decay)
	}
	o := g.Node("MatMul", operands(scores, values))                                // (B, H, T, dv)
	return g.Node("Transpose", operands(o), registry.IntsAttr("perm", 0, 2, 1, 3)) // (B, T, H, dv)
}

// projectONNX writes in_proj_qkvz and sorts it as project does: the
// convolution's input [q | k | v] (B, T, conv_dim), and z (B, T, H, dv).
func (c *linearPrepared) projectONNX(g registry.GraphBuilder, x string) (mixed, z string) {
	vw := int64(c.group * c.dv)
	dk := int64(c.dk)
	qkvz := linearONNX(g, c.qkvz, "in_proj_qkvz", x)
	qkvz = g.Node("Reshape", operands(qkvz, g.ConstInt64([]int64{0, 0, int64(c.keyHeads), 2*dk + 2*vw})))
	flat := func(v string, width int) string {
		return g.Node("Reshape", operands(v, g.ConstInt64([]int64{0, 0, int64(width)})))
	}
	q := flat(sliceLastONNX(g, qkvz, 0, dk), c.keyDim)
	k := flat(sliceLastONNX(g, qkvz, dk, 2*dk), c.keyDim)
	v := flat(sliceLastONNX(g, qkvz, 2*dk, 2*dk+vw), c.valueDim)
	z = sliceLastONNX(g, qkvz, 2*dk+vw, 2*dk+2*vw)
	z = g.Node("Reshape", operands(z, g.ConstInt64([]int64{0, 0, int64(c.heads), int64(c.dv)})))
	return g.Node("Concat", operands(q, k, v), registry.IntAttr("axis", -1)), z
}

// convolveONNX writes silu of the causal depthwise convolution of mixed
// (B, T, conv_dim): kernel−1 zero rows before the tokens, then the sum over
// j of the rows j..j+T−1 times column j of conv1d.weight.
func (c *linearPrepared) convolveONNX(g registry.GraphBuilder, x, mixed string) string {
	pad := int64(c.kernel - 1)
	padded := mixed
	if pad > 0 {
		shape := g.Node("Concat", operands(
			g.Node("Slice", operands(g.Node("Shape", operands(x)), g.ConstInt64([]int64{0}), g.ConstInt64([]int64{1}))),
			g.ConstInt64([]int64{pad, int64(c.convDim)})), registry.IntAttr("axis", 0))
		zeros := g.Node("Expand", operands(g.ConstFloat([]float32{0}, 1, 1, 1), shape))
		padded = g.Node("Concat", operands(zeros, mixed), registry.IntAttr("axis", 1))
	}
	weight := g.Param("conv1d.weight") // (conv_dim, 1, kernel)
	var sum string
	for j := range int64(c.kernel) {
		end := j - pad // the last kernel−1−j rows belong to later outputs
		if end == 0 {
			end = math.MaxInt64
		}
		rows := g.Node("Slice", operands(padded, g.ConstInt64([]int64{j}), g.ConstInt64([]int64{end}), g.ConstInt64([]int64{1})))
		column := g.Node("Slice", operands(weight, g.ConstInt64([]int64{j}), g.ConstInt64([]int64{j + 1}), g.ConstInt64([]int64{2})))
		column = g.Node("Reshape", operands(column, g.ConstInt64([]int64{int64(c.convDim)})))
		term := g.Node("Mul", operands(rows, column))
		if sum == "" {
			sum = term
		} else {
			sum = g.Node("Add", operands(sum, term))
		}
	}
	return siluONNX(g, sum)
}

// gatesONNX writes the write strengths β = sigmoid(b) (B, T, H) of the
// delta rules and the log decays g = −exp(A_log)·softplus(a + dt_bias)
// (B, T, H) of the gated rules ("" where the rule has none).
func (c *linearPrepared) gatesONNX(g registry.GraphBuilder, x string) (beta, logDecay string) {
	if c.gateProj == nil {
		return "", ""
	}
	ba := linearONNX(g, c.gateProj, c.gateName, x)
	var b, a string
	switch {
	case c.rule.gated && c.rule.delta: // per key head: b of its value heads, then a
		grouped := g.Node("Reshape", operands(ba, g.ConstInt64([]int64{0, 0, int64(c.keyHeads), int64(2 * c.group)})))
		perHead := g.ConstInt64([]int64{0, 0, int64(c.heads)})
		b = g.Node("Reshape", operands(sliceLastONNX(g, grouped, 0, int64(c.group)), perHead))
		a = g.Node("Reshape", operands(sliceLastONNX(g, grouped, int64(c.group), int64(2*c.group)), perHead))
	case c.rule.delta:
		b = ba
	default:
		a = ba
	}
	if b != "" {
		beta = g.Node("Sigmoid", operands(b))
	}
	if a != "" {
		rate := g.Node("Neg", operands(g.Node("Exp", operands(g.Param("A_log")))))
		logDecay = g.Node("Mul", operands(rate, softplusONNX(g, g.Node("Add", operands(a, g.Param("dt_bias"))))))
	}
	return beta, logDecay
}

// linearTriangleValues are the masks of the parallel form over T tokens,
// each (T, T), query i in row i and key j in column j.
type linearTriangleValues struct {
	qPos, kPos string // the positions as (T, 1) and (1, T), int64
	causal     string // j ≤ i, bool
	causalF    string // j ≤ i as 1 and 0, float
}

// linearTriangles builds the masks from the token positions pos (T,).
func linearTriangles(g registry.GraphBuilder, pos string) linearTriangleValues {
	t := linearTriangleValues{
		qPos: g.Node("Unsqueeze", operands(pos, g.ConstInt64([]int64{1}))),
		kPos: g.Node("Unsqueeze", operands(pos, g.ConstInt64([]int64{0}))),
	}
	t.causal = g.Node("Not", operands(g.Node("Greater", operands(t.kPos, t.qPos))))
	t.causalF = g.Node("Cast", operands(t.causal), registry.IntAttr("to", onnxFloat))
	return t
}

// decayONNX is D (B, H, T, T): exp(G_i − G_j) for j ≤ i and 0 above the
// diagonal, G the cumulative sums of the log decays (B, H, T). The sums
// and the differences are taken in float64: G grows with the sequence, and
// in float32 its rounding, |G|·2⁻²⁴, would show in every decay factor.
func (t linearTriangleValues) decayONNX(g registry.GraphBuilder, logDecay string) string {
	toDouble := registry.IntAttr("to", onnxDouble)
	steps := g.Node("Cast", operands(g.Node("Unsqueeze", operands(logDecay, g.ConstInt64([]int64{-1})))), toDouble)
	triangle := g.Node("Cast", operands(t.causal), toDouble)
	cumulative := g.Node("MatMul", operands(triangle, steps)) // (B, H, T, 1)
	diff := g.Node("Sub", operands(cumulative, transposeLastTwo(g, cumulative)))
	decay := g.Node("Cast", operands(g.Node("Exp", operands(diff))), registry.IntAttr("to", onnxFloat))
	return g.Node("Where", operands(t.causal, decay, g.ScalarFloat(0))) // exp above the diagonal may be +Inf: dropped
}

// deltaValuesONNX is U (B, H, T, dv), the values the delta rules write:
// the solution of (I + A) U = diag(β) V with A the strictly lower part of
// diag(β) K Kᵀ ⊙ D.
func (t linearTriangleValues) deltaValuesONNX(g registry.GraphBuilder, k, v, beta, decay string) string {
	kb := g.Node("Mul", operands(k, beta))
	a := g.Node("Mul", operands(g.Node("MatMul", operands(kb, transposeLastTwo(g, k))), decay))
	strict := g.Node("Greater", operands(t.qPos, t.kPos))
	a = g.Node("Where", operands(strict, a, g.ScalarFloat(0)))
	// Level 0: the inverse of the 1×1 blocks is I, and I − A₀ that of the 2×2.
	eye := g.Node("Cast", operands(g.Node("Equal", operands(t.qPos, t.kPos))), registry.IntAttr("to", onnxFloat))
	inverse := g.Node("Sub", operands(eye, t.quartersONNX(g, a, 0)))
	for level := 1; level < deltaExportLevels; level++ {
		aj := t.quartersONNX(g, a, level)
		inverse = g.Node("Sub", operands(inverse, g.Node("MatMul", operands(g.Node("MatMul", operands(inverse, aj)), inverse))))
	}
	return g.Node("MatMul", operands(inverse, g.Node("Mul", operands(v, beta))))
}

// quartersONNX keeps the entries of a (B, H, T, T) whose query and key
// fall in the same block of 2^(level+1) positions but in different halves
// of it: the lower-left quarters that join the blocks of 2^level.
func (t linearTriangleValues) quartersONNX(g registry.GraphBuilder, a string, level int) string {
	sameBlock := func(size int64) string {
		s := g.ScalarInt64(size)
		return g.Node("Equal", operands(g.Node("Div", operands(t.qPos, s)), g.Node("Div", operands(t.kPos, s))))
	}
	joined := g.Node("And", operands(sameBlock(2<<level), g.Node("Not", operands(sameBlock(1<<level)))))
	return g.Node("Where", operands(joined, a, g.ScalarFloat(0)))
}

// normGateONNX writes the gated RMSNorm of o (B, T, H, dv) with z of the
// same shape: o / √(mean(o²) + eps) · weight · silu(z).
func (c *linearPrepared) normGateONNX(g registry.GraphBuilder, o, z string) string {
	return g.Node("Mul", operands(rmsNormONNX(g, o, "norm.weight", c.eps), siluONNX(g, z)))
}

// l2NormONNX divides each vector on the last axis of x by
// √(Σx² + 1e-6), as Hugging Face's l2norm does.
func l2NormONNX(g registry.GraphBuilder, x string) string {
	sum := g.Node("ReduceSum", operands(g.Node("Mul", operands(x, x)), g.ConstInt64([]int64{-1})), registry.IntAttr("keepdims", 1))
	return g.Node("Div", operands(x, g.Node("Sqrt", operands(g.Node("Add", operands(sum, g.ScalarFloat(l2NormEps)))))))
}

// siluONNX is x·sigmoid(x).
func siluONNX(g registry.GraphBuilder, x string) string {
	return g.Node("Mul", operands(x, g.Node("Sigmoid", operands(x))))
}

// softplusONNX is softplus as PyTorch computes it, x above 20 and
// log(1 + eˣ) below; ONNX's Softplus has no threshold and attnrun's
// executor does not run it. log(1 + e) is written as log1p: e itself where
// 1 + e rounds to 1, else log(u)·e/(u − 1) with u = 1 + e, which corrects
// the rounding of u (Goldberg's formula), so that small values keep their
// relative precision.
func softplusONNX(g registry.GraphBuilder, x string) string {
	e := g.Node("Exp", operands(x))
	u := g.Node("Add", operands(e, g.ScalarFloat(1)))
	one := g.ScalarFloat(1)
	corrected := g.Node("Mul", operands(g.Node("Log", operands(u)), g.Node("Div", operands(e, g.Node("Sub", operands(u, one))))))
	log1p := g.Node("Where", operands(g.Node("Equal", operands(u, one)), e, corrected))
	return g.Node("Where", operands(g.Node("Greater", operands(x, g.ScalarFloat(20))), x, log1p))
}

// transposeLastTwo swaps the last two axes of a 4-D value.
func transposeLastTwo(g registry.GraphBuilder, x string) string {
	return g.Node("Transpose", operands(x), registry.IntsAttr("perm", 0, 1, 3, 2))
}
