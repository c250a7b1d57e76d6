package layers

import (
	"fmt"
	"math"
	"testing"

	"github.com/attnrun/attnrun/internal/kernels"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// loadNonFiniteCases reads testdata/nonfinite_cases.json, written by
// testdata/nonfinite.py: modern_cases.json's format, with NaN and ±Inf in
// the inputs.
var loadNonFiniteCases = goldenCases[modernCase]("nonfinite_cases.json")

// requireSameNumbers compares got with want: NaN exactly where want has
// NaN, the same infinity where want has one, and the finite values at
// PyTorch's float32 tolerance.
func requireSameNumbers(t *testing.T, want, got []float32, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		switch {
		case math.IsNaN(w) || math.IsNaN(g):
			if math.IsNaN(w) != math.IsNaN(g) {
				require.Failf(t, msg, "element %d: got %g, want %g", i, g, w)
			}
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			if w != g {
				require.Failf(t, msg, "element %d: got %g, want %g", i, g, w)
			}
		case math.Abs(g-w) > torchAbs+torchRel*math.Abs(w):
			require.Failf(t, msg, "element %d: got %.7g, want %.7g (diff %.3g)", i, g, w, math.Abs(g-w))
		}
	}
}

// TestNonFiniteAgainstPyTorch runs every case of nonfinite_cases.json on
// every instruction set the kernels have here (AVX-512, AVX2, portable Go):
// with NaN or ±Inf in an input, each layer's output, and its attention
// weights through a hook (which takes the kernels' other path), must be
// PyTorch's: the same NaN and infinities, the same finite numbers.
func TestNonFiniteAgainstPyTorch(t *testing.T) {
	cases, err := loadNonFiniteCases()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(cases), 100)
	for _, isa := range kernels.ISAs() {
		t.Run(isa, func(t *testing.T) {
			restore, err := kernels.UseISA(isa)
			require.NoError(t, err)
			defer restore()
			for name, c := range cases {
				t.Run(name, func(t *testing.T) { checkNonFiniteCase(t, c) })
			}
		})
	}
}

// checkNonFiniteCase runs one case without and with a weights hook.
func checkNonFiniteCase(t *testing.T, c modernCase) {
	l := c.layer(t)
	plain, err := l.Forward(&registry.Run{}, c.inputs())
	require.NoError(t, err)
	require.Equal(t, c.Output.Shape, []int(plain.Shape()))
	requireSameNumbers(t, c.Output.Data, floats(plain), "output")
	if c.Weights == nil {
		return
	}
	var weights *tensor.Dense
	hooked, err := l.Forward(&registry.Run{Hook: func(_ string, w *tensor.Dense) { weights = w }}, c.inputs())
	require.NoError(t, err)
	requireSameNumbers(t, c.Output.Data, floats(hooked), "output with a hook")
	require.NotNil(t, weights)
	require.Equal(t, c.Weights.Shape, []int(weights.Shape()))
	requireSameNumbers(t, c.Weights.Data, floats(weights), "weights")
}

// TestNonFiniteGoldensAreNotTrivial guards the goldens: every case has
// NaN or an infinity in its output and finite numbers in its output or
// weights (so that where the NaN go is tested), and the cases that
// exercise a rule show it.
func TestNonFiniteGoldensAreNotTrivial(t *testing.T) {
	cases, err := loadNonFiniteCases()
	require.NoError(t, err)
	count := func(xs []float32) (nonFinite, finite int) {
		for _, x := range xs {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				nonFinite++
			} else {
				finite++
			}
		}
		return
	}
	for name, c := range cases {
		nf, f := count(c.Output.Data)
		if c.Weights != nil {
			_, fw := count(c.Weights.Data)
			f += fw
		}
		require.Positive(t, nf, "%s: no NaN or Inf in the output", name)
		require.Positive(t, f, "%s: nothing finite in the output or the weights", name)
	}
	// attention.simple, causal, NaN in the last token's feature 1: the
	// earlier queries never look at its score (masked_fill), but their
	// zero weight times its value is NaN, in feature 1 only.
	c := cases["simple_causal_t4_nan"]
	out := c.Output.Data // (2, 5, 4)
	for tok := range 4 {
		for f := range 4 {
			require.Equal(t, f == 1, math.IsNaN(float64(out[tok*4+f])), "token %d feature %d: %g", tok, f, out[tok*4+f])
		}
	}
	// nn.MultiheadAttention adds its masks: a NaN key that the causal mask
	// hides from query 0 still makes query 0's output NaN.
	c = cases["mha_causal_key3_nan"]
	nf, _ := count(c.Output.Data[:4]) // sequence 0, query 0
	require.Equal(t, 4, nf)
	// A fully masked query of attention.sdpa: zeros with masked_rows
	// zeros, NaN with nan, in the weights.
	for rows, want := range map[string]bool{"zeros": false, "nan": true} {
		w := cases["sdpa_keep_"+rows+"_t4_nan"].Weights
		require.NotNil(t, w)
		// sequence 0, head 0, query 1: its weights over the 5 keys
		got := w.Data[5 : 5+5]
		for _, x := range got {
			require.Equal(t, want, math.IsNaN(float64(x)), "masked_rows %s: %v", rows, got)
		}
	}
}

// TestNonFiniteExportsAgainstPyTorch exports every case's layer as a
// one-layer model at each of liveOpsets and runs it on the executor: the
// graph must give PyTorch's NaN, infinities and finite numbers too.
func TestNonFiniteExportsAgainstPyTorch(t *testing.T) {
	cases, err := loadNonFiniteCases()
	require.NoError(t, err)
	for name, c := range cases {
		for _, opset := range liveOpsets {
			t.Run(fmt.Sprintf("%s/opset%d", name, opset), func(t *testing.T) {
				m := c.model(t)
				pb, err := export.Model(m, export.Options{Opset: opset})
				require.NoError(t, err)
				g, err := exec.New(pb)
				require.NoError(t, err)
				feeds := map[string]*tensor.Dense{}
				for i, vi := range pb.GetGraph().GetInput() {
					feeds[vi.GetName()] = c.fedAs(c.inputs()[i], len(onnxio.Dims(vi)), m, i)
				}
				outs, err := g.Run(feeds)
				require.NoError(t, err)
				requireSameNumbers(t, c.Output.Data, floats(outs[export.OutputName]), "output")
			})
		}
	}
}
