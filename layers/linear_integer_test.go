package layers

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/registry"
)

// setIntegerParams validates an nn.linear_integer layer and writes its
// parameters by name.
func setIntegerParams(t *testing.T, l registry.Layer, values map[string][]float32) {
	t.Helper()
	require.NoError(t, l.Validate())
	for _, p := range l.Params() {
		if v, ok := values[p.Name]; ok {
			require.Len(t, v, p.Value.Shape().TotalSize(), p.Name)
			copy(floats(p.Value), v)
		}
	}
}

// TestLinearIntegerByHand: one token (130, 128) with input zero point 128
// is (2, 0); the weight rows (3, −1) and (5, 7) less their zero points 1
// and −1 are (2, −2) and (6, 8); the int32 sums 4 and 12, times
// 0.5·0.25 and 0.5·2, plus the bias (1, −1), are 1.5 and 11. The same
// from int64 tokens, batched; a weight written after a pass counts once
// ParamsChanged is called. (ONNX Runtime's numbers: TestLiftLinearInteger
// in onnxio/lift.)
func TestLinearIntegerByHand(t *testing.T) {
	l := fromYAML(t, "nn.linear_integer", "{d_in: 2, d_out: 2, per_channel: true}")
	setIntegerParams(t, l, map[string][]float32{
		"weight": {3, -1, 5, 7}, "bias": {1, -1}, "input_scale": {0.5}, "input_zero_point": {128},
		"weight_scale": {0.25, 2}, "weight_zero_point": {1, -1}})
	y, err := l.Forward(&registry.Run{}, []*tensor.Dense{tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float32{130, 128}))})
	require.NoError(t, err)
	assert.Equal(t, []float32{1.5, 11}, y.Data())
	y, err = l.Forward(&registry.Run{}, []*tensor.Dense{tensor.New(tensor.WithShape(2, 1, 2), tensor.WithBacking([]int64{130, 128, 128, 129}))})
	require.NoError(t, err)
	assert.Equal(t, []int{2, 1, 2}, []int(y.Shape()))
	assert.Equal(t, []float32{1.5, 11, 0.5*0.25*-2 + 1, 1*8 - 1}, y.Data())

	floats(l.Params()[0].Value)[0] = 4 // (3, 4): sum 6, times 0.125, plus 1
	l.(registry.ParamsWatcher).ParamsChanged()
	y, err = l.Forward(&registry.Run{}, []*tensor.Dense{tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float32{130, 128}))})
	require.NoError(t, err)
	assert.Equal(t, []float32{1.75, 11}, y.Data())
}

// TestLinearIntegerPerTensor: one weight scale and zero point serve every
// column.
func TestLinearIntegerPerTensor(t *testing.T) {
	l := fromYAML(t, "nn.linear_integer", "{d_in: 2, d_out: 2, bias: false}")
	setIntegerParams(t, l, map[string][]float32{"weight": {3, -1, 5, 7}, "input_scale": {0.5}, "input_zero_point": {128},
		"weight_scale": {0.25}, "weight_zero_point": {1}})
	names := []string{}
	for _, p := range l.Params() {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"weight", "input_scale", "input_zero_point", "weight_scale", "weight_zero_point"}, names)
	y, err := l.Forward(&registry.Run{}, []*tensor.Dense{tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float32{130, 128}))})
	require.NoError(t, err)
	assert.Equal(t, []float32{2 * 2 * 0.125, 2 * 4 * 0.125}, y.Data())
}

// TestLinearIntegerRefuses: the config's types, values that are not
// integers of their type, and tokens of another width are errors naming
// what was expected.
func TestLinearIntegerRefuses(t *testing.T) {
	l := fromYAML(t, "nn.linear_integer", "{d_in: 2, d_out: 2, input_type: int4}")
	assert.EqualError(t, l.Validate(), `input_type "int4": want uint8 or int8`)
	l = fromYAML(t, "nn.linear_integer", "{d_in: 2, d_out: 2, weight_type: float}")
	assert.EqualError(t, l.Validate(), `weight_type "float": want int8 or uint8`)

	x := func(v ...float32) []*tensor.Dense {
		return []*tensor.Dense{tensor.New(tensor.WithShape(1, len(v)), tensor.WithBacking(v))}
	}
	l = fromYAML(t, "nn.linear_integer", "{d_in: 2, d_out: 2}")
	setIntegerParams(t, l, map[string][]float32{"weight": {3, -1, 5, 128}})
	_, err := l.Forward(&registry.Run{}, x(1, 2))
	assert.EqualError(t, err, "weight[3] = 128: want an integer of int8 (-128 to 127)")

	l = fromYAML(t, "nn.linear_integer", "{d_in: 2, d_out: 2}")
	setIntegerParams(t, l, map[string][]float32{"weight_zero_point": {0.5}})
	_, err = l.Forward(&registry.Run{}, x(1, 2))
	assert.EqualError(t, err, "weight_zero_point[0] = 0.5: want an integer of int8 (-128 to 127)")

	l = fromYAML(t, "nn.linear_integer", "{d_in: 2, d_out: 2}")
	setIntegerParams(t, l, nil)
	_, err = l.Forward(&registry.Run{}, x(1, 256))
	assert.EqualError(t, err, "input[1] = 256: want an integer of uint8 (0 to 255)")
	_, err = l.Forward(&registry.Run{}, x(1, 2, 3))
	assert.EqualError(t, err, "d_in mismatch: input last dim 3, layer expects d_in 2")
	_, err = l.Forward(&registry.Run{}, []*tensor.Dense{tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float64{1, 2}))})
	assert.EqualError(t, err, "input dtype float64: want float32 or int64 holding the quantized integers")
}

// TestLinearIntegerBudget: the integer copy of the weight a pass keeps is
// reserved from the model's budget, refused when it does not fit, and
// given back by ParamsChanged.
func TestLinearIntegerBudget(t *testing.T) {
	l := fromYAML(t, "nn.linear_integer", "{d_in: 64, d_out: 64}").(*LinearInteger)
	probe := budget.New(1 << 30)
	require.NoError(t, l.Provision(probe))
	params := probe.Used()
	x := []*tensor.Dense{tensor.New(tensor.WithShape(1, 64), tensor.WithBacking(make([]float32, 64)))}

	tight := budget.New(params + 1000)
	require.NoError(t, l.Provision(tight))
	_, err := l.Forward(&registry.Run{}, x)
	require.ErrorIs(t, err, budget.ErrExceeded)
	assert.ErrorContains(t, err, "the integer weight needs 16.2 KiB")

	roomy := budget.New(1 << 30)
	require.NoError(t, l.Provision(roomy))
	_, err = l.Forward(&registry.Run{}, x)
	require.NoError(t, err)
	assert.Equal(t, params+4*(64*64+64), roomy.Used())
	l.ParamsChanged()
	assert.Equal(t, params, roomy.Used())
}
