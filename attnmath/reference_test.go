package attnmath

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// floats is a JSON list of float32 values, with "nan", "inf" and "-inf"
// for the non-finite ones; nil stays nil.
type floats []float32

func (f *floats) UnmarshalJSON(data []byte) error {
	var raw []any
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if raw == nil {
		*f = nil
		return nil
	}
	out := make([]float32, len(raw))
	for i, v := range raw {
		switch x := v.(type) {
		case float64:
			out[i] = float32(x)
		case string:
			out[i] = map[string]float32{"nan": float32(math.NaN()), "inf": float32(math.Inf(1)), "-inf": float32(math.Inf(-1))}[x]
		}
	}
	*f = out
	return nil
}

// reference is testdata/reference.json, written by testdata/reference.py
// from PyTorch 1.13 on the CPU in float32.
type reference struct {
	Linear []struct {
		Name          string
		Rows, In, Out int
		X, W, B, Y    floats
	}
	Softmax []struct {
		Name    string
		Rows, N int
		X, Y    floats
	}
	Attend []struct {
		Name                        string
		Batch, Heads                int
		KVHeads                     int `json:"kv_heads"`
		Queries, Keys               int
		HeadDim                     int `json:"head_dim"`
		ValueDim                    int `json:"value_dim"`
		Scale                       float32
		Causal                      bool
		ZeroEmptyRows               bool `json:"zero_empty_rows"`
		Mask, Q, K, V, Out, Weights floats
	}
}

func loadReference(t *testing.T) reference {
	t.Helper()
	data, err := os.ReadFile("testdata/reference.json")
	require.NoError(t, err)
	var ref reference
	require.NoError(t, json.Unmarshal(data, &ref))
	require.NotEmpty(t, ref.Attend)
	return ref
}

// assertClose checks got against PyTorch's want at float32's tolerance,
// 1e-5 relative and 1e-6 absolute, with NaN only where PyTorch has NaN
// and infinities equal to themselves.
func assertClose(t *testing.T, what string, want, got []float32) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i, w := range want {
		g := got[i]
		switch {
		case math.IsNaN(float64(w)) || math.IsNaN(float64(g)):
			if math.IsNaN(float64(w)) != math.IsNaN(float64(g)) {
				t.Fatalf("%s[%d] = %v, PyTorch has %v", what, i, g, w)
			}
		case math.IsInf(float64(w), 0) || math.IsInf(float64(g), 0):
			if w != g {
				t.Fatalf("%s[%d] = %v, PyTorch has %v", what, i, g, w)
			}
		case math.Abs(float64(g-w)) > 1e-6+1e-5*math.Abs(float64(w)):
			t.Fatalf("%s[%d] = %v, PyTorch has %v (difference %.3g)", what, i, g, w, g-w)
		}
	}
}

func TestLinearMatchesPyTorch(t *testing.T) {
	for _, c := range loadReference(t).Linear {
		t.Run(c.Name, func(t *testing.T) {
			y := make([]float32, c.Rows*c.Out)
			for i := range y {
				y[i] = float32(math.NaN()) // Linear must overwrite, not add
			}
			require.NoError(t, Linear(y, c.X, c.W, c.B, c.Rows, c.In, c.Out))
			assertClose(t, "y", c.Y, y)
		})
	}
}

func TestSoftmaxMatchesPyTorch(t *testing.T) {
	for _, c := range loadReference(t).Softmax {
		t.Run(c.Name, func(t *testing.T) {
			x := append([]float32(nil), c.X...)
			require.NoError(t, Softmax(x, c.Rows, c.N))
			assertClose(t, "softmax", c.Y, x)
		})
	}
}

func TestAttendMatchesPyTorch(t *testing.T) {
	for _, c := range loadReference(t).Attend {
		t.Run(c.Name, func(t *testing.T) {
			a := Attention{
				Batch: c.Batch, Heads: c.Heads, KVHeads: c.KVHeads, Queries: c.Queries, Keys: c.Keys,
				HeadDim: c.HeadDim, ValueDim: c.ValueDim, Scale: c.Scale, Causal: c.Causal,
				Mask: c.Mask, ZeroEmptyRows: c.ZeroEmptyRows,
			}
			if c.Weights != nil {
				a.Weights = make([]float32, len(c.Weights))
			}
			out := make([]float32, len(c.Out))
			require.NoError(t, Attend(out, c.Q, c.K, c.V, a))
			assertClose(t, "out", c.Out, out)
			if c.Weights != nil {
				assertClose(t, "weights", c.Weights, a.Weights)
			}
		})
	}
}
