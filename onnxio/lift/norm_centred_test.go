package lift_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Cohere's LayerNorm without bias, written by hand as the dynamo exporter
// writes it before opset 23: c = x − mean(x), then Hugging Face's RMSNorm
// of c (Pow, ReduceMean, Add eps, Sqrt, Reciprocal, Mul) times the weight.
// It lifts as norm.layer with its weight and a bias of zeros, and the
// lifted model gives the LayerNorm formula, computed here in float64.
func TestLiftLayerNormCentredRMS(t *testing.T) {
	const width, eps = 4, 1e-5
	weight := []float32{0.5, -1, 2, 1.5}
	dims := []onnxio.Dim{onnxio.SymbolicDim("batch"), onnxio.SymbolicDim("sequence"), onnxio.FixedDim(width)}
	node := func(op string, out string, in ...string) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String(out), Input: in, Output: []string{out}}
	}
	mean := func(out, in string) *onnxpb.NodeProto {
		n := node("ReduceMean", out, in, "axes")
		n.Attribute = []*onnxpb.AttributeProto{{Name: proto.String("keepdims"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1)}}
		return n
	}
	inits := map[string]*tensor.Dense{
		"axes":   tensor.New(tensor.WithShape(1), tensor.WithBacking([]int64{-1})),
		"two":    tensor.New(tensor.WithBacking([]float32{2})),
		"eps":    tensor.New(tensor.WithBacking([]float32{eps})),
		"weight": tensor.New(tensor.WithShape(width), tensor.WithBacking(weight)),
	}
	var initializers []*onnxpb.TensorProto
	for _, name := range []string{"axes", "two", "eps", "weight"} {
		tp, err := onnxio.DenseToTensor(name, inits[name])
		require.NoError(t, err)
		initializers = append(initializers, tp)
	}
	m := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(9),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(18)}},
		Graph: &onnxpb.GraphProto{
			Name: proto.String("cohere_norm"),
			Node: []*onnxpb.NodeProto{
				mean("mean", "x"),
				node("Sub", "centred", "x", "mean"),
				node("Pow", "square", "centred", "two"),
				mean("variance", "square"),
				node("Add", "shifted", "variance", "eps"),
				node("Sqrt", "std", "shifted"),
				node("Reciprocal", "rstd", "std"),
				node("Mul", "normed", "centred", "rstd"),
				node("Mul", "y", "weight", "normed"),
			},
			Initializer: initializers,
			Input:       []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("x", onnxio.Float, dims)},
			Output:      []*onnxpb.ValueInfoProto{onnxio.TensorValueInfo("y", onnxio.Float, dims)},
		},
	}
	res, err := lift.Lift(m)
	require.NoError(t, err)
	assert.Contains(t, res.Config, "type: norm.layer, d: 4, eps: 1e-05}")

	x := []float32{0.3, -1.2, 2.5, 0.7, -0.4, 0.1, 0.9, -2.2}
	y, err := res.Model.Forward(nil, tensor.New(tensor.WithShape(1, 2, width), tensor.WithBacking(x)))
	require.NoError(t, err)
	got := y.Data().([]float32)
	for row := range 2 {
		v := x[row*width : (row+1)*width]
		var mu, variance float64
		for _, f := range v {
			mu += float64(f) / width
		}
		for _, f := range v {
			variance += (float64(f) - mu) * (float64(f) - mu) / width
		}
		for i, f := range v {
			want := (float64(f) - mu) / math.Sqrt(variance+eps) * float64(weight[i])
			assert.InDelta(t, want, float64(got[row*width+i]), 1e-6+1e-5*math.Abs(want), fmt.Sprintf("row %d, feature %d", row, i))
		}
	}
}
