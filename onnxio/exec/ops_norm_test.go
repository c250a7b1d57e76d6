package exec

import "testing"

// x and the expected values below come from numpy (float32 inputs).
var normX = f32(dims(2, 2, 3), 0.1, -1.2, 2.0, 0.5, 0.25, -0.75, 3.0, 1.0, -2.0, 0.0, 0.0, 1.5)

func TestSoftmax(t *testing.T) {
	last := f32(dims(2, 2, 3), 0.1256529837846756, 0.03424442932009697, 0.8401025533676147, 0.48418986797332764,
		0.37708741426467896, 0.1387227177619934, 0.8756005764007568, 0.11849965155124664, 0.00589974969625473,
		0.15428076684474945, 0.15428076684474945, 0.6914384365081787)
	alongAxis1 := f32(dims(2, 2, 3), 0.40131232142448425, 0.19000156223773956, 0.9399133324623108, 0.5986876487731934,
		0.8099984526634216, 0.060086652636528015, 0.9525741338729858, 0.7310585975646973, 0.02931223064661026,
		0.04742587357759476, 0.26894140243530273, 0.970687747001648)
	coerced1 := f32(dims(2, 2, 3), 0.09058381617069244, 0.024686966091394424, 0.6056337952613831, 0.13513515889644623,
		0.10524336993694305, 0.0387168750166893, 0.6826975345611572, 0.09239306300878525, 0.004599979612976313,
		0.03398950770497322, 0.03398950770497322, 0.1523304134607315)
	coerced0 := f32(dims(2, 2, 3), 0.02655295841395855, 0.007236527279019356, 0.17753028869628906, 0.03961236774921417,
		0.030850142240524292, 0.011349131353199482, 0.482577383518219, 0.06530974805355072, 0.0032515807542949915,
		0.024026112630963326, 0.024026112630963326, 0.10767756402492523)
	runOpCases(t, []opCase{
		{name: "opset 13 default axis -1", op: "Softmax", opset: 13, in: []*value{normX}, want: []*value{last}},
		{name: "opset 13 axis 1", op: "Softmax", opset: 13, attrs: attrs{"axis": aInt(1)}, in: []*value{normX}, want: []*value{alongAxis1}},
		// Before 13 the input is coerced to 2-D at the axis: default 1
		// normalizes each batch's 6 values together.
		{name: "opset 11 default axis 1", op: "Softmax", opset: 11, in: []*value{normX}, want: []*value{coerced1}},
		{name: "opset 12 still coerces", op: "Softmax", opset: 12, in: []*value{normX}, want: []*value{coerced1}},
		{name: "opset 11 axis 0", op: "Softmax", opset: 11, attrs: attrs{"axis": aInt(0)}, in: []*value{normX}, want: []*value{coerced0}},
		{name: "opset 11 axis -1 is along the last axis", op: "Softmax", opset: 11, attrs: attrs{"axis": aInt(-1)},
			in: []*value{normX}, want: []*value{last}},
		{name: "float64", op: "Softmax", opset: 13, in: []*value{castValue(normX, Float64)}, want: []*value{castValue(last, Float64)}},
		{name: "masked row of all -Inf is NaN", op: "Softmax", opset: 13,
			in:   []*value{f32(dims(2, 2), 0, -inf32, -inf32, -inf32)},
			want: []*value{f32(dims(2, 2), 1, 0, nan32, nan32)}},
		{name: "large inputs", op: "Softmax", opset: 13, in: []*value{f32(dims(2), 1000, 1000)}, want: []*value{f32(dims(2), 0.5, 0.5)}},
		{name: "axis out of range", op: "Softmax", opset: 13, attrs: attrs{"axis": aInt(3)}, in: []*value{normX},
			err: "axis 3 is out of range for rank 3"},
		{name: "int input", op: "Softmax", opset: 13, in: []*value{i64(dims(1), 1)}, err: "want float32 or float64"},
	})
}

func TestLayerNormalization(t *testing.T) {
	scale := f32(dims(3), 1.0, 0.5, 2.0)
	bias := f32(dims(3), 0.0, 0.1, -0.1)
	y := f32(dims(2, 2, 3), -0.15220342576503754, -0.47076287865638733, 2.4874587059020996, 0.9258041977882385,
		0.33145105838775635, -2.8774125576019287, 1.13554847240448, 0.18111060559749603, -2.6955394744873047,
		-0.7070996761322021, -0.25354984402656555, 2.7283987998962402)
	mean := f32(dims(2, 2, 1), 0.29999998211860657, 0.0, 0.6666666865348816, 0.5)
	inv := f32(dims(2, 2, 1), 0.7610172033309937, 1.851608395576477, 0.48666366934776306, 1.4141993522644043)
	scale2 := f32(dims(2, 3), 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
	y2 := f32(dims(2, 2, 3), -0.004920280072838068, -0.265695184469223, 0.5461512207984924, 0.13776789605617523,
		0.0492028146982193, -0.531390368938446, 0.15701065957546234, 0.054141610860824585, -0.5035169720649719,
		-0.15159648656845093, -0.18949560821056366, 0.35733461380004883)
	runOpCases(t, []opCase{
		{name: "last axis with mean and inverse std", op: "LayerNormalization", opset: 17,
			in: []*value{normX, scale, bias}, want: []*value{y, mean, inv}},
		{name: "two axes, no bias, epsilon", op: "LayerNormalization", opset: 17,
			attrs: attrs{"axis": aInt(1), "epsilon": aFloat(1e-3)}, in: []*value{normX, scale2}, want: []*value{y2}},
		{name: "scale does not fit", op: "LayerNormalization", opset: 17,
			in: []*value{normX, f32(dims(2), 1, 1)}, err: "Scale: shape (2,) does not broadcast to (3,)"},
		{name: "float64 stash", op: "LayerNormalization", opset: 17, attrs: attrs{"stash_type": aInt(int64(Float64))},
			in: []*value{normX, scale, bias}, want: []*value{y, castValue(mean, Float64), castValue(inv, Float64)}},
	})
}

func TestReduce(t *testing.T) {
	x := f32(dims(2, 3), 1, 2, 3, 4, 5, 6)
	runOpCases(t, []opCase{
		{name: "sum axes input keepdims", op: "ReduceSum", opset: 13, in: []*value{x, i64(dims(1), 1)},
			want: []*value{f32(dims(2, 1), 6, 15)}},
		{name: "sum no keepdims", op: "ReduceSum", opset: 13, attrs: attrs{"keepdims": aInt(0)}, in: []*value{x, i64(dims(1), 1)},
			want: []*value{f32(dims(2), 6, 15)}},
		{name: "sum negative axis", op: "ReduceSum", opset: 13, in: []*value{x, i64(dims(1), -2)},
			want: []*value{f32(dims(1, 3), 5, 7, 9)}},
		{name: "sum all", op: "ReduceSum", opset: 13, in: []*value{x}, want: []*value{f32(dims(1, 1), 21)}},
		{name: "sum empty axes, noop", op: "ReduceSum", opset: 13, attrs: attrs{"noop_with_empty_axes": aInt(1)},
			in: []*value{x, i64(dims(0))}, want: []*value{x}},
		{name: "sum axes attribute before 13", op: "ReduceSum", opset: 11, attrs: attrs{"axes": aInts(0), "keepdims": aInt(0)},
			in: []*value{x}, want: []*value{f32(dims(3), 5, 7, 9)}},
		{name: "sum int64", op: "ReduceSum", opset: 13, attrs: attrs{"keepdims": aInt(0)}, in: []*value{i64(dims(2, 3), 1, 2, 3, 4, 5, 6), i64(dims(1), 1)},
			want: []*value{i64(dims(2), 6, 15)}},
		{name: "mean axes attribute at 13", op: "ReduceMean", opset: 13, attrs: attrs{"axes": aInts(1)},
			in: []*value{x}, want: []*value{f32(dims(2, 1), 2, 5)}},
		{name: "mean axes input at 18", op: "ReduceMean", opset: 18, attrs: attrs{"keepdims": aInt(0)},
			in: []*value{x, i64(dims(1), 0)}, want: []*value{f32(dims(3), 2.5, 3.5, 4.5)}},
		{name: "mean of middle axis", op: "ReduceMean", opset: 13, attrs: attrs{"axes": aInts(1), "keepdims": aInt(0)},
			in: []*value{f32(dims(2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8)}, want: []*value{f32(dims(2, 2), 2, 3, 6, 7)}},
		{name: "max all", op: "ReduceMax", opset: 13, attrs: attrs{"keepdims": aInt(0)}, in: []*value{x},
			want: []*value{f32(dims(), 6)}},
		{name: "max int64", op: "ReduceMax", opset: 13, attrs: attrs{"axes": aInts(1)}, in: []*value{i64(dims(2, 2), -5, -7, 3, 1)},
			want: []*value{i64(dims(2, 1), -5, 3)}},
		{name: "max propagates NaN", op: "ReduceMax", opset: 13, in: []*value{f32(dims(3), 1, nan32, 3)},
			want: []*value{f32(dims(1), nan32)}},
		{name: "repeated axis", op: "ReduceSum", opset: 13, in: []*value{x, i64(dims(2), 1, -1)}, err: "appears twice"},
		{name: "axis out of range", op: "ReduceMean", opset: 13, attrs: attrs{"axes": aInts(2)}, in: []*value{x},
			err: "axis 2 is out of range for rank 2"},
	})
}
