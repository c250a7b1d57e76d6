package layers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/attnrun/attnrun/registry"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"gorgonia.org/tensor"
)

// array is a JSON nested list of numbers, flattened row-major with its
// shape. JSON has no NaN or infinity: null stands for NaN, and the strings
// "inf" and "-inf" for ±Inf (modern.py writes them so).
type array struct {
	Shape []int
	Data  []float32
}

func (a *array) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = array{}
	return a.flatten(v, 0)
}

func (a *array) flatten(v any, depth int) error {
	switch x := v.(type) {
	case nil:
		a.Data = append(a.Data, float32(math.NaN()))
		return nil
	case float64:
		a.Data = append(a.Data, float32(x))
		return nil
	case string:
		switch x {
		case "inf":
			a.Data = append(a.Data, float32(math.Inf(1)))
		case "-inf":
			a.Data = append(a.Data, float32(math.Inf(-1)))
		default:
			return fmt.Errorf("unexpected string %q in a number array", x)
		}
		return nil
	case []any:
		if depth == len(a.Shape) {
			a.Shape = append(a.Shape, len(x))
		} else if a.Shape[depth] != len(x) {
			return fmt.Errorf("ragged array at depth %d", depth)
		}
		for _, e := range x {
			if err := a.flatten(e, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unexpected JSON value %v", v)
}

// dense wraps the array as a tensor (a copy, so tests may not share storage).
func (a array) dense() *tensor.Dense { return newDense(a.Shape, append([]float32(nil), a.Data...)) }

// stateDict is a state_dict as torch_cases.py writes it: names in order.
type stateDict struct {
	Names  []string
	Values map[string]array
}

func (s *stateDict) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	s.Values = map[string]array{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name := tok.(string)
		var a array
		if err := dec.Decode(&a); err != nil {
			return err
		}
		s.Names = append(s.Names, name)
		s.Values[name] = a
	}
	return nil
}

// torchCase is one entry of testdata/torch_cases.json.
type torchCase struct {
	Params  stateDict `json:"params"`
	Input   array     `json:"input"`
	Output  array     `json:"output"`
	Weights *array    `json:"weights"`
}

// goldenCases returns a loader of testdata/file, a JSON object of named
// cases, that reads and decodes the file once per test binary.
func goldenCases[C any](file string) func() (map[string]C, error) {
	return sync.OnceValues(func() (map[string]C, error) {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			return nil, err
		}
		var cases map[string]C
		return cases, json.Unmarshal(b, &cases)
	})
}

var loadTorchCases = goldenCases[torchCase]("torch_cases.json")

// torchCaseNamed returns a case of testdata/torch_cases.json.
func torchCaseNamed(t *testing.T, name string) torchCase {
	t.Helper()
	cases, err := loadTorchCases()
	require.NoError(t, err)
	c, ok := cases[name]
	require.True(t, ok, "no case %q in torch_cases.json", name)
	return c
}

// newDense makes a float32 tensor of the given shape over data.
func newDense(shape []int, data []float32) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// matrix makes a (rows, cols) tensor from rows written out in a test.
func matrix(rows [][]float32) *tensor.Dense {
	var data []float32
	for _, r := range rows {
		data = append(data, r...)
	}
	return newDense([]int{len(rows), len(rows[0])}, data)
}

// randomDense fills a tensor of the given shape from U(-1, 1).
func randomDense(rng *rand.Rand, shape ...int) *tensor.Dense {
	data := make([]float32, volume(shape))
	for i := range data {
		data[i] = 2*rng.Float32() - 1
	}
	return newDense(shape, data)
}

// fromYAML builds a registered layer with its defaults and the given
// config fields, decoded strictly, without validating it.
func fromYAML(t *testing.T, id, config string) registry.Layer {
	t.Helper()
	info, err := registry.Lookup(id)
	require.NoError(t, err)
	l := info.New()
	dec := yaml.NewDecoder(stringReader(config))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(l), "config %q", config)
	return l
}

// validated runs Validate and fills every parameter from U(-1, 1) with a fixed seed.
func validated(t *testing.T, l registry.Layer, seed uint64) registry.Layer {
	t.Helper()
	require.NoError(t, l.Validate())
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, p := range l.Params() {
		for i := range floats(p.Value) {
			floats(p.Value)[i] = 2*rng.Float32() - 1
		}
	}
	return l
}

// setParams validates l and copies the named values into its parameters,
// requiring exactly the names (in order) and shapes the state dict has.
func setParams(t *testing.T, l registry.Layer, sd stateDict, prefix string) {
	t.Helper()
	require.NoError(t, l.Validate())
	var names []string
	for _, p := range l.Params() {
		name := prefix + p.Name
		names = append(names, name)
		v, ok := sd.Values[name]
		require.True(t, ok, "state dict has no %s", name)
		require.Equal(t, v.Shape, []int(p.Value.Shape()), "shape of %s", name)
		copy(floats(p.Value), v.Data)
	}
	var want []string
	for _, n := range sd.Names {
		if len(n) >= len(prefix) && n[:len(prefix)] == prefix {
			want = append(want, n)
		}
	}
	require.Equal(t, want, names, "parameter names and order")
}

// forward runs layers in sequence on x in eval mode and returns the output
// and the attention weights the hook received (the last ones, if several
// layers report). It runs the chain twice, without a hook (the fused path
// that never materializes weights) and with one, and requires both outputs
// to agree; the output returned is the one without a hook.
func forward(t *testing.T, x *tensor.Dense, chain ...registry.Layer) (out, weights *tensor.Dense) {
	t.Helper()
	pass := func(run *registry.Run) *tensor.Dense {
		y := x
		for _, l := range chain {
			var err error
			y, err = l.Forward(run, []*tensor.Dense{y})
			require.NoError(t, err)
		}
		return y
	}
	out = pass(&registry.Run{Layer: "attn"})
	hooked := pass(&registry.Run{Layer: "attn", Hook: func(layer string, w *tensor.Dense) {
		require.Equal(t, "attn", layer)
		weights = w
	}})
	require.Equal(t, []int(out.Shape()), []int(hooked.Shape()))
	assertClose(t, floats(out), floats(hooked), 1e-6, 1e-6, "output with and without a weights hook")
	return out, weights
}

// assertClose compares element by element: |got - want| <= abs + rel·|want|.
func assertClose(t *testing.T, want, got []float32, abs, rel float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		diff := math.Abs(float64(got[i]) - float64(want[i]))
		if diff > abs+rel*math.Abs(float64(want[i])) || math.IsNaN(float64(got[i])) {
			require.Failf(t, msg, "element %d: got %.7g, want %.7g (diff %.3g)", i, got[i], want[i], diff)
		}
	}
}

// stringReader reads a YAML snippet.
func stringReader(s string) *bytes.Reader { return bytes.NewReader([]byte(s)) }
