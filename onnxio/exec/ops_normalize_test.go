package exec

import (
	"math"
	"testing"
)

// TestNormalizations checks LogSoftmax and the normalizations of
// ops_normalize.go on values worked out by hand.
func TestNormalizations(t *testing.T) {
	r := float32(1 / math.Sqrt(12.5+1e-5)) // RMS of (3, 4) with epsilon 1e-5
	inv := 1 / math.Sqrt(1.25+1e-5)        // 1/σ of (0, 1, 2, 3) with epsilon 1e-5
	runOpCases(t, []opCase{
		{name: "log softmax", op: "LogSoftmax", opset: 13, in: []*value{f32(dims(1, 3), 1, 2, 3)}, want: []*value{f32(dims(1, 3), -2.4076059644, -1.4076059644, -0.4076059644)}},
		{name: "log softmax axis 0", op: "LogSoftmax", opset: 13, attrs: attrs{"axis": aInt(0)}, in: []*value{f32(dims(2, 1), 0, 0)}, want: []*value{f32(dims(2, 1), -math.Ln2, -math.Ln2)}},
		{name: "log softmax large", op: "LogSoftmax", opset: 13, in: []*value{f64(dims(2), 1000, 1000)}, want: []*value{f64(dims(2), -math.Ln2, -math.Ln2)}},
		{name: "log softmax opset 11 flattens", op: "LogSoftmax", opset: 11, in: []*value{f32(dims(1, 2, 2), 0, 0, 0, 0)}, want: []*value{f32(dims(1, 2, 2), -2*math.Ln2, -2*math.Ln2, -2*math.Ln2, -2*math.Ln2)}},
		{name: "hardmax first maximum", op: "Hardmax", opset: 13, in: []*value{f32(dims(2, 3), 1, 3, 3, -1, -2, -3)}, want: []*value{f32(dims(2, 3), 0, 1, 0, 1, 0, 0)}},
		{name: "hardmax axis 0", op: "Hardmax", opset: 13, attrs: attrs{"axis": aInt(0)}, in: []*value{f32(dims(2, 2), 1, 5, 2, 4)}, want: []*value{f32(dims(2, 2), 0, 1, 1, 0)}},
		{name: "hardmax opset 11 flattens", op: "Hardmax", opset: 11, in: []*value{f64(dims(1, 2, 2), 1, 2, 4, 3)}, want: []*value{f64(dims(1, 2, 2), 0, 0, 1, 0)}},
		{name: "det", op: "Det", opset: 22, in: []*value{f32(dims(2, 2), 1, 2, 3, 4)}, want: []*value{f32(dims(), -2)}},
		{name: "det batch with pivoting", op: "Det", opset: 11, in: []*value{f64(dims(2, 3, 3), 0, 1, 2, 1, 0, 3, 4, -3, 8, 2, 0, 0, 0, 3, 0, 0, 0, 4)}, want: []*value{f64(dims(2), -2, 24)}},
		{name: "det singular", op: "Det", opset: 22, in: []*value{f32(dims(2, 2), 1, 2, 2, 4)}, want: []*value{f32(dims(), 0)}},
		{name: "det not square", op: "Det", opset: 22, in: []*value{f32(dims(2, 3), 1, 2, 3, 4, 5, 6)}, err: "not a batch of square matrices"},
		{name: "rms norm", op: "RMSNormalization", opset: 23, in: []*value{f32(dims(2, 2), 3, 4, 0, 0), f32(dims(2), 1, 2)}, want: []*value{f32(dims(2, 2), 3*r, 8*r, 0, 0)}},
		{name: "rms norm axis 0", op: "RMSNormalization", opset: 23, attrs: attrs{"axis": aInt(0), "epsilon": aFloat(0)}, in: []*value{f32(dims(2, 1), 3, 4), f32(dims(1), 2)}, want: []*value{f32(dims(2, 1), 6/float32(math.Sqrt(12.5)), 8/float32(math.Sqrt(12.5)))}},
		{name: "rms norm scale shape", op: "RMSNormalization", opset: 23, in: []*value{f32(dims(1, 2), 3, 4), f32(dims(3), 1, 2, 3)}, err: "scale: shape (3,) does not broadcast to (2,)"},
		{name: "lp l1 axis 0", op: "LpNormalization", opset: 22, attrs: attrs{"p": aInt(1), "axis": aInt(0)}, in: []*value{f32(dims(2, 2), 1, -2, 3, 4)}, want: []*value{f32(dims(2, 2), 0.25, -1.0/3, 0.75, 2.0/3)}},
		{name: "lp l2 zero row", op: "LpNormalization", opset: 1, in: []*value{f32(dims(2, 2), 3, 4, 0, 0)}, want: []*value{f32(dims(2, 2), 0.6, 0.8, 0, 0)}},
		{name: "lp p 3", op: "LpNormalization", opset: 22, attrs: attrs{"p": aInt(3)}, in: []*value{f32(dims(1), 1)}, err: "p is 3, want 1 or 2"},
		{name: "mvn", op: "MeanVarianceNormalization", opset: 13, attrs: attrs{"axes": aInts(1)}, in: []*value{f32(dims(2, 2), 1, 3, 5, 5)}, want: []*value{f32(dims(2, 2), -1, 1, 0, 0)}},
		{name: "instance norm", op: "InstanceNormalization", opset: 22, in: []*value{f32(dims(1, 2, 4), 0, 1, 2, 3, 0, 1, 2, 3), f32(dims(2), 1, 2), f32(dims(2), 0, 1)},
			want: []*value{f32(dims(1, 2, 4), float32(-1.5*inv), float32(-0.5*inv), float32(0.5*inv), float32(1.5*inv), float32(1-3*inv), float32(1-inv), float32(1+inv), float32(1+3*inv))}},
		{name: "batch norm", op: "BatchNormalization", opset: 15, attrs: attrs{"epsilon": aFloat(0)},
			in:   []*value{f32(dims(1, 2, 2), 1, 3, 1, 3), f32(dims(2), 1, 2), f32(dims(2), 0, 10), f32(dims(2), 1, 3), f32(dims(2), 4, 1)},
			want: []*value{f32(dims(1, 2, 2), 0, 1, 6, 10)}},
		{name: "batch norm training", op: "BatchNormalization", opset: 15, attrs: attrs{"epsilon": aFloat(0), "training_mode": aInt(1), "momentum": aFloat(0.5)},
			in:   []*value{f32(dims(2, 1), 1, 3), f32(dims(1), 1), f32(dims(1), 0), f32(dims(1), 0), f32(dims(1), 1)},
			want: []*value{f32(dims(2, 1), -1, 1), f32(dims(1), 1), f32(dims(1), 1)}},
		{name: "batch norm stats need training", op: "BatchNormalization", opset: 15, outs: 3,
			in: []*value{f32(dims(1, 1), 1), f32(dims(1), 1), f32(dims(1), 0), f32(dims(1), 0), f32(dims(1), 1)}, err: "only with training_mode 1"},
	})
}
