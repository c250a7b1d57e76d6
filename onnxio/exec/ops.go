package exec

import (
	"math"
	"slices"
)

// ops is every operator the executor runs, by ONNX op type (default
// domain). Each entry says from which opset version its semantics are
// implemented, how many inputs and outputs it takes and which attributes
// it understands.
var ops = map[string]*opSpec{
	// Elementwise arithmetic, numpy broadcasting (opset 7 on; earlier
	// versions broadcast by attribute).
	"Add": binarySpec(7, arithOp(opAdd)),
	"Sub": binarySpec(7, arithOp(opSub)),
	"Mul": binarySpec(7, arithOp(opMul)),
	"Div": binarySpec(7, arithOp(opDiv)),
	"Pow": binarySpec(7, powOp),
	"Max": {since: 6, minIn: 1, maxIn: -1, minOut: 1, maxOut: 1, run: arithOp(opMax)},
	"Min": {since: 6, minIn: 1, maxIn: -1, minOut: 1, maxOut: 1, run: arithOp(opMin)},

	// Elementwise functions (opset 6 on; earlier versions carried the
	// legacy consumed_inputs attribute).
	"Sqrt":       unarySpec(6, floatOp(math.Sqrt)),
	"Exp":        unarySpec(6, floatOp(math.Exp)),
	"Log":        unarySpec(6, floatOp(math.Log)),
	"Tanh":       unarySpec(6, floatOp(math.Tanh)),
	"Sigmoid":    unarySpec(6, floatOp(sigmoid)),
	"Reciprocal": unarySpec(6, floatOp(reciprocal)),
	"Sin":        unarySpec(7, floatOp(math.Sin)),
	"Cos":        unarySpec(7, floatOp(math.Cos)),
	"Erf":        unarySpec(9, erfOp),
	"IsNaN":      unarySpec(9, isNaNOp),
	"Abs":        unarySpec(6, signedOp(opAbs)),
	"Neg":        unarySpec(6, signedOp(opNeg)),
	"Relu":       unarySpec(6, signedOp(opRelu)),
	"Clip": {since: 6, minIn: 1, maxIn: 3, minOut: 1, maxOut: 1, run: clipOp,
		attrs: map[string]attrKind{"min": attrFloat, "max": attrFloat}, movedToInput: map[string]int{"min": 11, "max": 11}},

	// Comparisons and logic.
	"Equal":          binarySpec(7, compareOp(opEqual)),
	"Less":           binarySpec(7, compareOp(opLess)),
	"Greater":        binarySpec(7, compareOp(opGreater)),
	"LessOrEqual":    binarySpec(12, compareOp(opLessOrEqual)),
	"GreaterOrEqual": binarySpec(12, compareOp(opGreaterOrEqual)),
	"And":            binarySpec(7, logicalOp(func(x, y bool) bool { return x && y })),
	"Or":             binarySpec(7, logicalOp(func(x, y bool) bool { return x || y })),
	"Xor":            binarySpec(7, logicalOp(func(x, y bool) bool { return x != y })),
	"Not":            unarySpec(1, notOp),
	"Where":          {since: 9, minIn: 3, maxIn: 3, minOut: 1, maxOut: 1, run: whereOp},

	// Linear algebra and normalization.
	"MatMul": binarySpec(1, matmulOp),
	"Gemm": {since: 7, minIn: 2, maxIn: 3, minOut: 1, maxOut: 1, run: gemmOp,
		attrs: map[string]attrKind{"alpha": attrFloat, "beta": attrFloat, "transA": attrInt, "transB": attrInt}},
	"Softmax": {since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: softmaxOp(false),
		attrs: map[string]attrKind{"axis": attrInt}},
	"Attention":       attentionSpec, // ops_attention.go
	"RotaryEmbedding": rotarySpec,    // ops_rotary.go
	"LayerNormalization": {since: 17, runtimeSince: 1, minIn: 2, maxIn: 3, minOut: 1, maxOut: 3, run: layerNormOp,
		attrs: map[string]attrKind{"axis": attrInt, "epsilon": attrFloat, "stash_type": attrInt}},
	"ReduceSum":  reduceSpec(opReduceSum, 13),
	"ReduceMean": reduceSpec(opReduceMean, 18),
	"ReduceMax":  reduceSpec(opReduceMax, 18),
	"ReduceL2":   reduceSpec(opReduceL2, 18),

	// Shapes and data movement.
	"Identity": unarySpec(1, identityOp),
	"Cast": {since: 6, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: castOp,
		attrs: map[string]attrKind{"to": attrInt, "saturate": attrInt, "round_mode": attrString}},
	"Transpose": {since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: transposeOp,
		attrs: map[string]attrKind{"perm": attrInts}},
	"Reshape": {since: 5, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: reshapeOp,
		attrs: map[string]attrKind{"allowzero": attrInt}},
	"Flatten": {since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: flattenOp,
		attrs: map[string]attrKind{"axis": attrInt}},
	"Size": unarySpec(1, sizeOp),
	"Shape": {since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: shapeOp,
		attrs: map[string]attrKind{"start": attrInt, "end": attrInt}},
	"Unsqueeze": {since: 1, minIn: 1, maxIn: 2, minOut: 1, maxOut: 1, run: unsqueezeOp,
		attrs: map[string]attrKind{"axes": attrInts}, movedToInput: map[string]int{"axes": 13}},
	"Squeeze": {since: 1, minIn: 1, maxIn: 2, minOut: 1, maxOut: 1, run: squeezeOp,
		attrs: map[string]attrKind{"axes": attrInts}, movedToInput: map[string]int{"axes": 13}},
	"Concat": {since: 4, minIn: 1, maxIn: -1, minOut: 1, maxOut: 1, run: concatOp,
		attrs: map[string]attrKind{"axis": attrInt}},
	"Slice": {since: 1, minIn: 1, maxIn: 5, minOut: 1, maxOut: 1, run: sliceOp,
		attrs:        map[string]attrKind{"starts": attrInts, "ends": attrInts, "axes": attrInts},
		movedToInput: map[string]int{"starts": 10, "ends": 10, "axes": 10}},
	"Split": {since: 2, minIn: 1, maxIn: 2, minOut: 1, maxOut: -1, run: splitOp,
		attrs:        map[string]attrKind{"axis": attrInt, "split": attrInts, "num_outputs": attrInt},
		movedToInput: map[string]int{"split": 13}},
	"Gather": {since: 1, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: gatherOp,
		attrs: map[string]attrKind{"axis": attrInt}},
	"Expand": binarySpec(8, expandOp),
	"Tile":   binarySpec(6, tileOp),
	"Trilu": {since: 14, minIn: 1, maxIn: 2, minOut: 1, maxOut: 1, run: triluOp,
		attrs: map[string]attrKind{"upper": attrInt}},

	// Sources.
	"Constant": {since: 1, minIn: 0, maxIn: 0, minOut: 1, maxOut: 1, run: constantOp,
		attrs: map[string]attrKind{
			"value": attrTensor, "value_float": attrFloat, "value_floats": attrFloats,
			"value_int": attrInt, "value_ints": attrInts,
			"value_string": attrString, "value_strings": attrStrings,
		}},
	"ConstantOfShape": {since: 9, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: constantOfShapeOp,
		attrs: map[string]attrKind{"value": attrTensor}},
	"Range": {since: 11, minIn: 3, maxIn: 3, minOut: 1, maxOut: 1, run: rangeOp},
	"Dropout": {since: 7, minIn: 1, maxIn: 3, minOut: 1, maxOut: 2, run: dropoutOp,
		attrs: map[string]attrKind{"ratio": attrFloat, "seed": attrInt}, movedToInput: map[string]int{"ratio": 12}},
}

// maxOpset is the newest default-domain opset the executor runs. Up to 24
// (ONNX 1.19) the table above is checked against every version; opset 24
// changed only Attention and element types among its ops. Opset 25 added
// element types (int2, uint2) to Cast, Reshape, Transpose and other ops and
// the sliding windows of Attention, 26 added BitCast and CumProd, 27 added
// LinearAttention and CausalConvWithState and a stash_type to Range that
// matters only for float16 and bfloat16, and 28 (still in development in
// ONNX 1.23) added SwiGLU and revised Cast, Celu, Einsum, Mod, OneHot and
// the Optional ops (ONNX's operator docs). Ops whose semantics
// changed in a version the executor does not implement are listed in
// unimplementedRevisions; later opsets are refused rather than run on
// guesses.
const maxOpset = 28

// unimplementedRevisions lists ops whose semantics changed at a version up
// to maxOpset that their kernel does not implement, with that version: a
// node of that opset or later is refused when the graph is prepared.
var unimplementedRevisions = map[string]int{
	"Cast":   28, // revised in opset 28 (ONNX's operator docs); not reviewed yet
	"Celu":   28, // revised in opset 28; not reviewed yet
	"Einsum": 28, // revised in opset 28; not reviewed yet
	"Mod":    28, // opset 28 defines float Mod without fmod and its zeros and infinities
	"OneHot": 28, // revised in opset 28; not reviewed yet
}

// unarySpec describes a one-input, one-output op without attributes.
func unarySpec(since int, run opFunc) *opSpec {
	return &opSpec{since: since, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, run: run}
}

// binarySpec describes a two-input, one-output op without attributes.
func binarySpec(since int, run opFunc) *opSpec {
	return &opSpec{since: since, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: run}
}

// reduceSpec describes a Reduce op whose axes became an input at opset
// axesInput.
func reduceSpec(kind reduction, axesInput int) *opSpec {
	return &opSpec{since: 1, minIn: 1, maxIn: 2, minOut: 1, maxOut: 1, run: reduceOp(kind, axesInput),
		attrs:        map[string]attrKind{"axes": attrInts, "keepdims": attrInt, "noop_with_empty_axes": attrInt},
		movedToInput: map[string]int{"axes": axesInput}}
}

// SupportedOps lists the ONNX operators the executor runs, sorted.
func SupportedOps() []string {
	names := make([]string, 0, len(ops))
	for name := range ops {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
