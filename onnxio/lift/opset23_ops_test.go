package lift_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// TestLiftRMSNormalizationOp lifts ONNX's RMSNormalization op (opset 23,
// as the dynamo exporter writes Llama's norms) into norm.rms with the
// scale as its weight, and the lifted layer computes the op's formula,
// x / √(mean(x²) + ε) · scale, within 1e-5 relative, 1e-6 absolute (float64
// reference).
func TestLiftRMSNormalizationOp(t *testing.T) {
	const d, eps = 6, 1e-5
	scale := []float32{0.5, 1, 1.5, -2, 0.25, 3}
	s, err := onnxio.DenseToTensor("scale", tensor.New(tensor.WithShape(d), tensor.WithBacking(scale)))
	require.NoError(t, err)
	m := oneNodeGraph(d, &onnxpb.NodeProto{OpType: proto.String("RMSNormalization"), Name: proto.String("norm"), Input: []string{"x", "scale"}, Output: []string{"y"},
		Attribute: []*onnxpb.AttributeProto{{Name: proto.String("epsilon"), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(eps)}}}, s)
	res, err := lift.Lift(m)
	require.NoError(t, err)
	assert.Equal(t, []string{"norm.rms"}, layerTypes(res.Config), res.Config)
	assert.Equal(t, []lift.Mapping{{Initializer: "scale", Param: "norm.weight"}}, res.Mapping)

	x := randomTokens(2, 3, d)
	got, err := res.Model.Forward(&registry.Run{}, x)
	require.NoError(t, err)
	xs, ys := x.Data().([]float32), got.Data().([]float32)
	for row := 0; row < len(xs)/d; row++ {
		ms := 0.0
		for _, v := range xs[row*d : (row+1)*d] {
			ms += float64(v) * float64(v) / d
		}
		for i := range d {
			want := float64(xs[row*d+i]) / math.Sqrt(ms+eps) * float64(scale[i])
			assert.InDelta(t, want, ys[row*d+i], 1e-6+1e-5*math.Abs(want), "row %d, %d", row, i)
		}
	}
}

// oneNodeGraph is an opset-23 graph of one node from x, (batch, sequence,
// d), to y of the same shape, with the given initializers.
func oneNodeGraph(d int64, n *onnxpb.NodeProto, inits ...*onnxpb.TensorProto) *onnxpb.ModelProto {
	dims := []onnxio.Dim{{Param: "batch"}, {Param: "sequence"}, {Known: true, Value: d}}
	return &onnxpb.ModelProto{
		IrVersion:   proto.Int64(10),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(23)}},
		Graph: &onnxpb.GraphProto{
			Name:        proto.String(n.GetOpType()),
			Node:        []*onnxpb.NodeProto{n},
			Initializer: inits,
			Input:       []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("x", onnxio.Float, dims)},
			Output:      []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("y", onnxio.Float, dims)},
		},
	}
}

// TestLiftGeluOpOnHeads lifts ONNX's Gelu op (opset 20; Gemma's MLP at opset 23),
// exact and tanh, into activation.gelu, which computes the op's formulas
// within 1e-5 relative, 1e-6 absolute (float64 reference).
func TestLiftGeluOpOnHeads(t *testing.T) {
	for _, c := range []struct {
		approximate string
		f           func(x float64) float64
	}{
		{"none", func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }},
		{"tanh", func(x float64) float64 { return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) }},
	} {
		t.Run(c.approximate, func(t *testing.T) {
			m := oneNodeGraph(5, &onnxpb.NodeProto{OpType: proto.String("Gelu"), Name: proto.String("act"), Input: []string{"x"}, Output: []string{"y"},
				Attribute: []*onnxpb.AttributeProto{{Name: proto.String("approximate"), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(c.approximate)}}})
			res, err := lift.Lift(m)
			require.NoError(t, err)
			assert.Contains(t, res.Config, "type: activation.gelu, approximate: "+c.approximate)
			x := randomTokens(2, 3, 5)
			got, err := res.Model.Forward(&registry.Run{}, x)
			require.NoError(t, err)
			for i, v := range x.Data().([]float32) {
				want := c.f(float64(v))
				assert.InDelta(t, want, got.Data().([]float32)[i], 1e-6+1e-5*math.Abs(want), "x = %g", v)
			}
		})
	}
}
