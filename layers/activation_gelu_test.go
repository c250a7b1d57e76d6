package layers

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/registry"
)

// TestGELUAsItsExport runs the exact activation.gelu on 4096 values from
// −12 to 12 (beyond the range where erf rounds to ±1), as a layer and as
// its ONNX export on the executor: the same bits, each within a few
// float32 roundings of the float64 GELU (absolute near the negative tail,
// where 1 + erf(x/√2) cancels, as in PyTorch's float32 kernel).
func TestGELUAsItsExport(t *testing.T) {
	m, err := models.Parse([]byte("name: g\nlayers:\n  - {name: act, type: activation.gelu}\n"), "g.yaml")
	require.NoError(t, err)
	const n = 4096
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(-12 + 24*float64(i)/(n-1))
	}
	in := tensor.New(tensor.WithShape(1, n/64, 64), tensor.WithBacking(x))
	got, err := m.Forward(&registry.Run{}, in)
	require.NoError(t, err)
	layer := got.Data().([]float32)

	pb, err := export.Model(m, export.Options{})
	require.NoError(t, err)
	g, err := exec.New(pb)
	require.NoError(t, err)
	outs, err := g.Run(map[string]*tensor.Dense{pb.GetGraph().GetInput()[0].GetName(): in})
	require.NoError(t, err)
	require.Equal(t, outs[export.OutputName].Data().([]float32), layer, "the layer and its export on the executor")

	for i, v := range x {
		exact := 0.5 * float64(v) * (1 + math.Erf(float64(v)/math.Sqrt2))
		require.InDelta(t, exact, float64(layer[i]), 4e-7+4*6e-8*math.Abs(exact), "gelu(%g)", v)
	}
}
