package exec

import (
	"math"
	"testing"
)

// TestLosses checks NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
// on values worked out by hand.
func TestLosses(t *testing.T) {
	x := f32(dims(2, 3), -1, -2, -3, -4, -5, -6)
	target := i64(dims(2), 2, 0)
	str := func(s string) attribute { return attribute{kind: attrString, s: s} }
	runOpCases(t, []opCase{
		{name: "nll none", op: "NegativeLogLikelihoodLoss", opset: 13, attrs: attrs{"reduction": str("none")}, in: []*value{x, target}, want: []*value{f32(dims(2), 3, 4)}},
		{name: "nll sum", op: "NegativeLogLikelihoodLoss", opset: 13, attrs: attrs{"reduction": str("sum")}, in: []*value{x, target}, want: []*value{f32(dims(), 7)}},
		{name: "nll mean", op: "NegativeLogLikelihoodLoss", opset: 22, in: []*value{x, target}, want: []*value{f32(dims(), 3.5)}},
		{name: "nll weighted mean", op: "NegativeLogLikelihoodLoss", opset: 12, in: []*value{x, target, f32(dims(3), 1, 2, 0.5)}, want: []*value{f32(dims(), 5.5/1.5)}},
		{name: "nll ignore index", op: "NegativeLogLikelihoodLoss", opset: 13, attrs: attrs{"ignore_index": aInt(0)}, in: []*value{x, target}, want: []*value{f32(dims(), 3)}},
		{name: "nll spatial", op: "NegativeLogLikelihoodLoss", opset: 13, attrs: attrs{"reduction": str("none")}, in: []*value{f32(dims(1, 2, 2), -1, -2, -3, -4), i32(dims(1, 2), 1, 0)}, want: []*value{f32(dims(1, 2), 3, 2)}},
		{name: "nll bad target", op: "NegativeLogLikelihoodLoss", opset: 13, in: []*value{x, i64(dims(2), 3, 0)}, err: "target 3 is not a class index in [0, 3)"},
		{name: "sce with log prob", op: "SoftmaxCrossEntropyLoss", opset: 13, outs: 2, in: []*value{f32(dims(1, 2), 0, 0), i64(dims(1), 1)},
			want: []*value{f32(dims(), math.Ln2), f32(dims(1, 2), -math.Ln2, -math.Ln2)}},
		{name: "sce sum", op: "SoftmaxCrossEntropyLoss", opset: 12, attrs: attrs{"reduction": str("sum")}, in: []*value{f64(dims(2, 2), 0, 0, 1000, 0), i64(dims(2), 0, 0)}, want: []*value{f64(dims(), math.Ln2)}},
	})
}
