package layers

import (
	"encoding/json"
	"math"
	"sort"
	"sync"
	"testing"

	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// modernCase is one entry of testdata/modern_cases.json, written by
// testdata/torch/modern.py.
type modernCase struct {
	Type    string          `json:"type"`
	Config  json.RawMessage `json:"config"`
	Params  stateDict       `json:"params"`
	Inputs  []array         `json:"inputs"`
	Output  array           `json:"output"`
	Weights *array          `json:"weights"`
	// Float64 is the output of a float64 copy of the module, for cases
	// whose float32 computation cancels (norms, GELU, MLPs): an element
	// further than 1e-5/1e-6 from Output passes the float64 rule of
	// docs/crosscheck.md.
	Float64 *array `json:"float64"`
}

// assertOutput checks got against the case's PyTorch output: within
// 1e-5/1e-6, NaN exactly where PyTorch has NaN, or by the float64 rule
// where the case carries its float64 output.
func (c modernCase) assertOutput(t *testing.T, got []float32, msg string) {
	t.Helper()
	if c.Float64 == nil {
		assertCloseNaN(t, c.Output.Data, got, torchAbs, torchRel, msg)
		return
	}
	assertCloseOrFloat64(t, c.Output.Data, c.Float64.Data, got, float64RuleBound(c.Output.Data, c.Float64.Data), msg)
}

var loadModernCases = goldenCases[modernCase]("modern_cases.json")

// modernCases returns the cases sorted by name.
func modernCases(t *testing.T) ([]string, map[string]modernCase) {
	t.Helper()
	cases, err := loadModernCases()
	require.NoError(t, err)
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, cases
}

// layer builds the case's layer from its registry ID and config, decoded
// strictly as a model config is, and loads the case's parameters,
// requiring PyTorch's state_dict names, order and shapes.
func (c modernCase) layer(t *testing.T) registry.Layer {
	t.Helper()
	l := fromYAML(t, c.Type, string(c.Config)) // JSON is YAML
	setParams(t, l, c.Params, "")
	return l
}

// inputs returns fresh copies of the case's inputs.
func (c modernCase) inputs() []*tensor.Dense {
	xs := make([]*tensor.Dense, len(c.Inputs))
	for i, a := range c.Inputs {
		xs[i] = a.dense()
	}
	return xs
}

// assertHookWeights checks the weights a hook received, (B, H, Tq, Tk),
// against PyTorch's; with no golden the hook must have received none
// (absent says why).
func assertHookWeights(t *testing.T, want *array, got *tensor.Dense, absent string) {
	t.Helper()
	if want == nil {
		require.Nil(t, got, absent)
		return
	}
	require.NotNil(t, got, "the hook received no weights")
	require.Equal(t, want.Shape, []int(got.Shape()), "weights shape (B, H, Tq, Tk)")
	assertCloseNaN(t, want.Data, floats(got), torchAbs, torchRel, "weights")
}

// assertCloseNaN is assertClose where NaN is expected exactly where want
// has NaN.
func assertCloseNaN(t *testing.T, want, got []float32, abs, rel float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if math.IsNaN(w) || math.IsNaN(g) {
			if math.IsNaN(w) != math.IsNaN(g) {
				require.Failf(t, msg, "element %d: got %.7g, want %.7g", i, g, w)
			}
			continue
		}
		if diff := math.Abs(g - w); diff > abs+rel*math.Abs(w) {
			require.Failf(t, msg, "element %d: got %.7g, want %.7g (diff %.3g)", i, g, w, diff)
		}
	}
}

// TestModernAgainstPyTorch runs every case of modern_cases.json: the layer
// built from its config must list PyTorch's parameters, and give PyTorch's
// output and attention weights, with and without a weights hook.
func TestModernAgainstPyTorch(t *testing.T) {
	names, cases := modernCases(t)
	require.GreaterOrEqual(t, len(names), 39)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := cases[name]
			l := c.layer(t)
			plain, err := l.Forward(&registry.Run{}, c.inputs())
			require.NoError(t, err)
			var weights *tensor.Dense
			hooked, err := l.Forward(&registry.Run{Layer: name, Hook: func(layer string, w *tensor.Dense) {
				require.Equal(t, name, layer)
				require.Nil(t, weights, "the hook was called twice")
				weights = w
			}}, c.inputs())
			require.NoError(t, err)

			for _, out := range []*tensor.Dense{plain, hooked} {
				require.Equal(t, c.Output.Shape, []int(out.Shape()), "output shape")
				c.assertOutput(t, floats(out), "output")
			}
			assertHookWeights(t, c.Weights, weights, "a layer without attention reported weights")
		})
	}
}

// TestModernGoldensAreNotTrivial guards the goldens themselves: the cases
// meant to have fully masked rows have them (zeros or NaN), and the others
// have none, so that those behaviours are really exercised.
func TestModernGoldensAreNotTrivial(t *testing.T) {
	_, cases := modernCases(t)
	hasNaN := func(xs []float32) bool {
		for _, x := range xs {
			if math.IsNaN(float64(x)) {
				return true
			}
		}
		return false
	}
	for _, name := range []string{"sdpa_drop_mask_nan", "mha_nan_rows"} {
		require.True(t, hasNaN(cases[name].Output.Data), "%s has no NaN output", name)
	}
	for name, c := range cases {
		if name != "sdpa_drop_mask_nan" && name != "mha_nan_rows" {
			require.False(t, hasNaN(c.Output.Data), "%s has NaN output", name)
		}
	}
	// sdpa_keep_mask's sequence 1, query 2 sees no key: its weights are zeros.
	w := cases["sdpa_keep_mask"].Weights
	require.NotNil(t, w)
	tk := w.Shape[3]
	for h := range w.Shape[1] {
		row := ((1*w.Shape[1]+h)*w.Shape[2] + 2) * tk
		require.Equal(t, make([]float32, tk), w.Data[row:row+tk])
	}
	// sdpa_cross_more_queries: bottom-right alignment hides every key from
	// the first Tq−Tk = 3 queries.
	w = cases["sdpa_cross_more_queries"].Weights
	require.Equal(t, []int{2, 2, 6, 3}, w.Shape)
	require.Equal(t, make([]float32, 3*3), w.Data[:3*3])
}

// TestModernConcurrentForward runs each case's layer from several
// goroutines at once: Forward must not modify the layer (run with -race).
func TestModernConcurrentForward(t *testing.T) {
	names, cases := modernCases(t)
	for _, name := range names {
		c := cases[name]
		l := c.layer(t)
		var wg sync.WaitGroup
		outs := make([]*tensor.Dense, 4)
		errs := make([]error, 4)
		for i := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i], errs[i] = l.Forward(&registry.Run{Hook: func(string, *tensor.Dense) {}}, c.inputs())
			}()
		}
		wg.Wait()
		for i, out := range outs {
			require.NoError(t, errs[i], name)
			c.assertOutput(t, floats(out), name)
		}
	}
}
