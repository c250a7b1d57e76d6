package tensorfmt

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// printCase is one tensor of testdata/print.json and the text PyTorch
// printed for it (testdata/torch_print.py).
type printCase struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	Data  []any  `json:"data"`
	Text  string `json:"text"`
}

func loadCases(t *testing.T) []printCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/print.json")
	require.NoError(t, err)
	var file struct {
		Cases []printCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &file))
	require.NotEmpty(t, file.Cases)
	return file.Cases
}

// number decodes a JSON element: a number, or "nan", "inf", "-inf".
func number(t *testing.T, v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case string:
		switch x {
		case "nan":
			return math.NaN()
		case "inf":
			return math.Inf(1)
		case "-inf":
			return math.Inf(-1)
		}
	}
	t.Fatalf("element %v is not a number", v)
	return 0
}

// dense builds the case's tensor with gorgonia.
func (c printCase) dense(t *testing.T) *tensor.Dense {
	n := len(c.Data)
	var backing any
	switch c.DType {
	case "float32":
		d := make([]float32, n)
		for i, v := range c.Data {
			d[i] = float32(number(t, v))
		}
		backing = d
	case "float64":
		d := make([]float64, n)
		for i, v := range c.Data {
			d[i] = number(t, v)
		}
		backing = d
	case "int64", "int32", "uint8":
		d := make([]int64, n)
		for i, v := range c.Data {
			d[i] = int64(number(t, v))
		}
		switch c.DType {
		case "int32":
			backing = widen[int64, int32](d)
		case "uint8":
			backing = widen[int64, uint8](d)
		default:
			backing = d
		}
	case "bool":
		d := make([]bool, n)
		for i, v := range c.Data {
			d[i] = v.(bool)
		}
		backing = d
	default:
		t.Fatalf("case %q: dtype %s has no builder", c.Name, c.DType)
	}
	if len(c.Shape) == 0 {
		return tensor.New(tensor.FromScalar(reflectFirst(backing)))
	}
	return tensor.New(tensor.WithShape(c.Shape...), tensor.WithBacking(backing))
}

// reflectFirst returns the only element of a one-element slice.
func reflectFirst(s any) any {
	switch d := s.(type) {
	case []float32:
		return d[0]
	case []float64:
		return d[0]
	case []int64:
		return d[0]
	case []bool:
		return d[0]
	}
	panic("unexpected scalar type")
}

// Every case prints exactly as PyTorch 1.13 printed it: notation, width,
// wrapping, summary and suffixes.
func TestDenseMatchesPyTorch(t *testing.T) {
	for _, c := range loadCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			if len(c.Data) == 0 {
				// gorgonia cannot hold an empty tensor; the text is
				// format's alone.
				dtype := map[string]string{"float32": "", "float64": "torch.float64"}[c.DType]
				assert.Equal(t, c.Text, format(c.Shape, 0, &floats{}, dtype))
				return
			}
			assert.Equal(t, c.Text, Dense(c.dense(t)))
		})
	}
}

// Float32, which the CLI calls on raw slices, agrees with Dense.
func TestFloat32MatchesPyTorch(t *testing.T) {
	for _, c := range loadCases(t) {
		if c.DType != "float32" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			data := make([]float32, len(c.Data))
			for i, v := range c.Data {
				data[i] = float32(number(t, v))
			}
			assert.Equal(t, c.Text, Float32(data, c.Shape))
		})
	}
}

// A strided view prints its own elements, not its backing array's.
func TestDenseView(t *testing.T) {
	m := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1.5, 2, 3, 4, 5, 6}))
	v, err := m.Slice(nil, tensor.S(1, 3))
	require.NoError(t, err)
	assert.Equal(t, "tensor([[2., 3.],\n        [5., 6.]])", Dense(v.(*tensor.Dense)))
	assert.Equal(t, "<nil tensor>", Dense(nil))
}
