package exec

import "testing"

// TestActivations checks each activation on -2, -0.5, 0 and 1.5 against
// its formula evaluated by hand (e⁻² = 0.1353352832, e^-0.5 = 0.6065306597).
func TestActivations(t *testing.T) {
	x := f32(dims(4), -2, -0.5, 0, 1.5)
	x64 := f64(dims(4), -2, -0.5, 0, 1.5)
	runOpCases(t, []opCase{
		{name: "elu", op: "Elu", opset: 22, in: []*value{x}, want: []*value{f32(dims(4), -0.8646647168, -0.3934693403, 0, 1.5)}},
		{name: "elu alpha 2 float64", op: "Elu", opset: 6, attrs: attrs{"alpha": aFloat(2)}, in: []*value{x64}, want: []*value{f64(dims(4), -1.7293294335267746, -0.7869386805747332, 0, 1.5)}},
		{name: "celu alpha 2", op: "Celu", opset: 12, attrs: attrs{"alpha": aFloat(2)}, in: []*value{x}, want: []*value{f32(dims(4), -1.2642411177, -0.4423984339, 0, 1.5)}},
		{name: "leaky relu", op: "LeakyRelu", opset: 16, attrs: attrs{"alpha": aFloat(0.1)}, in: []*value{x}, want: []*value{f32(dims(4), -0.2, -0.05, 0, 1.5)}},
		{name: "leaky relu default", op: "LeakyRelu", opset: 16, in: []*value{x}, want: []*value{f32(dims(4), -0.02, -0.005, 0, 1.5)}},
		{name: "thresholded relu", op: "ThresholdedRelu", opset: 22, attrs: attrs{"alpha": aFloat(1.5)}, in: []*value{x}, want: []*value{f32(dims(4), 0, 0, 0, 0)}},
		{name: "thresholded relu default", op: "ThresholdedRelu", opset: 10, in: []*value{x}, want: []*value{f32(dims(4), 0, 0, 0, 1.5)}},
		{name: "selu", op: "Selu", opset: 22, in: []*value{x}, want: []*value{f32(dims(4), -1.5201664685, -0.6917581878, 0, 1.5760514)}},
		{name: "hard sigmoid", op: "HardSigmoid", opset: 22, in: []*value{x}, want: []*value{f32(dims(4), 0.1, 0.4, 0.5, 0.8)}},
		{name: "hard sigmoid clamps", op: "HardSigmoid", opset: 6, attrs: attrs{"alpha": aFloat(1), "beta": aFloat(0)}, in: []*value{x}, want: []*value{f32(dims(4), 0, 0, 0, 1)}},
		{name: "gelu", op: "Gelu", opset: 20, in: []*value{x}, want: []*value{f32(dims(4), -0.0455002639, -0.1542687694, 0, 1.3997892)}},
		{name: "gelu tanh", op: "Gelu", opset: 20, attrs: attrs{"approximate": {kind: attrString, s: "tanh"}}, in: []*value{x}, want: []*value{f32(dims(4), -0.0454023059, -0.1542859952, 0, 1.3995716)}},
		{name: "gelu bad mode", op: "Gelu", opset: 20, attrs: attrs{"approximate": {kind: attrString, s: "erf"}}, in: []*value{x}, err: `approximate "erf" is not one of none, tanh`},
		{name: "softplus", op: "Softplus", opset: 22, in: []*value{x}, want: []*value{f32(dims(4), 0.1269280110, 0.4740769842, 0.6931471806, 1.7014132779)}},
		{name: "softplus large", op: "Softplus", opset: 1, in: []*value{f32(dims(2), 1000, -1000)}, want: []*value{f32(dims(2), 1000, 0)}},
		{name: "softsign", op: "Softsign", opset: 1, in: []*value{x}, want: []*value{f32(dims(4), -2.0/3, -1.0/3, 0, 0.6)}},
		{name: "mish", op: "Mish", opset: 18, in: []*value{x}, want: []*value{f32(dims(4), -0.2525014826, -0.2207437659, 0, 1.4033782720)}},
		{name: "hard swish", op: "HardSwish", opset: 14, in: []*value{f32(dims(5), -4, -2, 0, 1.5, 3)}, want: []*value{f32(dims(5), 0, -1.0/3, 0, 1.125, 3)}},
		{name: "shrink", op: "Shrink", opset: 9, attrs: attrs{"lambd": aFloat(1), "bias": aFloat(0.5)}, in: []*value{x}, want: []*value{f32(dims(4), -1.5, 0, 0, 1)}},
		{name: "shrink int", op: "Shrink", opset: 9, attrs: attrs{"lambd": aFloat(1.5), "bias": aFloat(1.5)}, in: []*value{i32(dims(4), -3, -1, 1, 4)}, want: []*value{i32(dims(4), -1, 0, 0, 2)}},
		{name: "prelu broadcast", op: "PRelu", opset: 16, in: []*value{f32(dims(2, 2), -1, 2, -3, 4), f32(dims(2), 0.5, 0.25)}, want: []*value{f32(dims(2, 2), -0.5, 2, -1.5, 4)}},
		{name: "prelu int64", op: "PRelu", opset: 16, in: []*value{i64(dims(3), -2, 0, 5), i64(dims(1), 3)}, want: []*value{i64(dims(3), -6, 0, 5)}},
		{name: "prelu slope too big", op: "PRelu", opset: 16, in: []*value{f32(dims(2), 1, 2), f32(dims(2, 2), 1, 2, 3, 4)}, err: "does not broadcast to X's shape (2,)"},
		{name: "elu int refused", op: "Elu", opset: 22, in: []*value{i64(dims(1), 1)}, err: "dtype int64 is not supported here"},
	})
}
