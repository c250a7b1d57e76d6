package layers

import (
	"encoding/json"
	"os"
	"sort"
	"testing"

	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// frontierCase is one entry of testdata/frontier_layers.json, written by
// testdata/frontier_layers.py from Hugging Face's Qwen3-Next and
// DeepSeek-V3 modules.
type frontierCase struct {
	Type   string          `json:"type"`
	Config json.RawMessage `json:"config"`
	Params stateDict       `json:"params"`
	Inputs []array         `json:"inputs"`
	// Output is the module's float32 output (the chunked prefill for
	// gated_delta), Recurrent the token-by-token recurrence, Float64 the
	// module in float64, Steps its cached one-token-at-a-time decoding.
	Output    array  `json:"output"`
	Recurrent *array `json:"recurrent"`
	Float64   array  `json:"float64"`
	Steps     *array `json:"steps"`
	Weights   *array `json:"weights"`
}

var loadFrontierCases = goldenCases[frontierCase]("frontier_layers.json")

// frontierCasesEnv, when set, names a frontier_layers.json to check instead
// of the committed one: scripts/frontier_crosscheck.sh points it at cases
// drawn with a fresh seed (frontier_layers.py --seed N --out DIR).
const frontierCasesEnv = "ATTNRUN_FRONTIER_CASES"

// frontierCases returns the cases sorted by name.
func frontierCases(t *testing.T) ([]string, map[string]frontierCase) {
	t.Helper()
	cases, err := loadFrontierCases()
	if path := os.Getenv(frontierCasesEnv); path != "" {
		var b []byte
		b, err = os.ReadFile(path)
		require.NoError(t, err)
		cases = nil
		err = json.Unmarshal(b, &cases)
	}
	require.NoError(t, err)
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, cases
}

// layer builds the case's layer from its config, decoded strictly, and
// loads the module's state_dict, requiring its names, order and shapes.
func (c frontierCase) layer(t *testing.T) registry.Layer {
	t.Helper()
	l := fromYAML(t, c.Type, string(c.Config))
	setParams(t, l, c.Params, "")
	return l
}

// TestFrontierLayersAgainstHuggingFace runs every case: the layer must
// take the module's state_dict and give its output, within 1e-5 relative
// and 1e-6 absolute of each reference: the float32 module as Hugging Face
// runs it (for gated_delta, the chunked prefill, which sums in another
// order than the recurrence), the recurrence, and the float64 module.
func TestFrontierLayersAgainstHuggingFace(t *testing.T) {
	names, cases := frontierCases(t)
	require.Len(t, names, 7)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := cases[name]
			l := c.layer(t)
			var weights *tensor.Dense
			out, err := l.Forward(&registry.Run{Hook: func(_ string, w *tensor.Dense) { weights = w }}, []*tensor.Dense{c.Inputs[0].dense()})
			require.NoError(t, err)
			require.Equal(t, c.Output.Shape, []int(out.Shape()), "output shape")
			assertCloseNaN(t, c.Output.Data, floats(out), torchAbs, torchRel, "output")
			assertCloseNaN(t, c.Float64.Data, floats(out), torchAbs, torchRel, "float64 output")
			if c.Recurrent != nil {
				assertCloseNaN(t, c.Recurrent.Data, floats(out), torchAbs, torchRel, "recurrent output")
			}
			assertHookWeights(t, c.Weights, weights, "linear attention has no attention weights to report")
		})
	}
}

// TestFrontierLayersStep feeds every case token by token and in chunks:
// each step's rows must equal the module's full output, and stepping one
// token at a time must give what the module's own cached decoding gives.
func TestFrontierLayersStep(t *testing.T) {
	names, cases := frontierCases(t)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c := cases[name]
			l := c.layer(t)
			x := c.Inputs[0].dense()
			checkSteps(t, l, []*tensor.Dense{x}, stepSpec{roles: []role{stream}, exact: c.Float64.dense()}, c.Output.dense())
			if c.Steps == nil {
				return
			}
			s := l.(registry.Stepper)
			state := s.NewState()
			axis := len(x.Shape()) - 2
			for t0 := range x.Shape()[axis] {
				out, err := s.Step(&registry.Run{}, state, []*tensor.Dense{sliceAxis(x, axis, t0, t0+1)})
				require.NoError(t, err)
				want := sliceAxis(c.Steps.dense(), axis, t0, t0+1)
				assertCloseNaN(t, floats(want), floats(out), torchAbs, torchRel, "token-by-token step")
			}
		})
	}
}
