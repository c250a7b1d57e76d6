package tensorfmt

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
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
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // int64 extremes are exact
	require.NoError(t, dec.Decode(&file))
	require.NotEmpty(t, file.Cases)
	return file.Cases
}

// float decodes a JSON element: a number, or "nan", "inf", "-inf".
func float(t *testing.T, v any) float64 {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		require.NoError(t, err)
		return f
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

// integer decodes a JSON integer exactly.
func integer(t *testing.T, v any) int64 {
	n, err := strconv.ParseInt(string(v.(json.Number)), 10, 64)
	require.NoError(t, err)
	return n
}

// array builds the case's tensor; PyTorch's float16 and bfloat16 values
// are exact in float32, as array holds them.
func (c printCase) array(t *testing.T) *array.Array {
	dtypes := map[string]array.DType{}
	for _, dt := range array.StorableTypes() {
		dtypes[dt.String()] = dt
	}
	dt, ok := dtypes[c.DType]
	require.True(t, ok, "case %q: dtype %s", c.Name, c.DType)
	a, err := array.New(dt, c.Shape...)
	require.NoError(t, err)
	switch d := a.Data.(type) {
	case []float32:
		for i, v := range c.Data {
			d[i] = float32(float(t, v))
		}
	case []float64:
		for i, v := range c.Data {
			d[i] = float(t, v)
		}
	case []bool:
		for i, v := range c.Data {
			d[i] = v.(bool)
		}
	case []int64:
		for i, v := range c.Data {
			d[i] = integer(t, v)
		}
	case []int32:
		for i, v := range c.Data {
			d[i] = int32(integer(t, v))
		}
	case []int16:
		for i, v := range c.Data {
			d[i] = int16(integer(t, v))
		}
	case []int8:
		for i, v := range c.Data {
			d[i] = int8(integer(t, v))
		}
	case []uint8:
		for i, v := range c.Data {
			d[i] = uint8(integer(t, v))
		}
	default:
		t.Fatalf("case %q: dtype %s has no builder", c.Name, c.DType)
	}
	return a
}

// Every case prints exactly as PyTorch 1.13 printed it: notation, width,
// wrapping, summary and suffixes, for every dtype PyTorch prints, and
// through *tensor.Dense for those gorgonia holds.
func TestMatchesPyTorch(t *testing.T) {
	for _, c := range loadCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			a := c.array(t)
			assert.Equal(t, c.Text, Array(a))
			if a.Len() == 0 || a.DType.IsNarrow() {
				return // *tensor.Dense holds neither
			}
			d, err := a.Dense()
			require.NoError(t, err)
			assert.Equal(t, c.Text, Dense(d))
		})
	}
}

// The strings are what PyTorch prints for the same tensors (PyTorch 2.x
// for the float8 types; ONNX's name for int4, which PyTorch lacks).
func TestArrayAsPyTorch(t *testing.T) {
	for _, c := range []struct {
		a    *array.Array
		want string
	}{
		{array.FromSlice([]int{0}, []float32{}), "tensor([])"},
		{array.FromSlice([]int{2, 0}, []float32{}), "tensor([], size=(2, 0))"},
		{array.FromSlice([]int{0}, []int64{}), "tensor([], dtype=torch.int64)"},
		{array.FromSlice([]int{0, 3}, []int32{}), "tensor([], size=(0, 3), dtype=torch.int32)"},
		{&array.Array{DType: array.Float16, Shape: []int{0, 3}, Data: []float32{}}, "tensor([], size=(0, 3), dtype=torch.float16)"},
		{array.FromSlice([]int{2}, []int64{1, 2}), "tensor([1, 2])"},
		{array.FromSlice([]int{3}, []int32{1, -20, 300}), "tensor([  1, -20, 300], dtype=torch.int32)"},
		{array.FromSlice([]int{2, 2}, []int8{1, 2, 3, 4}), "tensor([[1, 2],\n        [3, 4]], dtype=torch.int8)"},
		{array.FromSlice([]int{3}, []bool{true, false, true}), "tensor([ True, False,  True])"},
		{array.FromSlice([]int{}, []bool{true}), "tensor(True)"},
		{array.FromSlice([]int{}, []int64{5}), "tensor(5)"},
		{array.FromSlice([]int{}, []int16{5}), "tensor(5, dtype=torch.int16)"},
		{array.FromSlice([]int{}, []float32{2.5}), "tensor(2.5000)"},
		{&array.Array{DType: array.Float16, Shape: []int{2}, Data: []float32{1.5, 2.25}}, "tensor([1.5000, 2.2500], dtype=torch.float16)"},
		{array.FromSlice([]int{2}, []float64{1, 2}), "tensor([1., 2.], dtype=torch.float64)"},
		{&array.Array{DType: array.BFloat16, Shape: []int{1}, Data: []float32{1.5}}, "tensor([1.5000], dtype=torch.bfloat16)"},
		{array.FromSlice([]int{2, 1}, []bool{true, false}), "tensor([[ True],\n        [False]])"},
		{array.FromSlice([]int{2}, []uint8{255, 0}), "tensor([255,   0], dtype=torch.uint8)"},
		{&array.Array{DType: array.Float16, Shape: []int{}, Data: []float32{float32(math.NaN())}}, "tensor(nan, dtype=torch.float16)"},
		{array.FromSlice([]int{2, 1, 2}, []int64{1, 2, 3, 4}), "tensor([[[1, 2]],\n\n        [[3, 4]]])"},
		{&array.Array{DType: array.Float8E4M3FN, Shape: []int{1}, Data: []float32{448}}, "tensor([448.], dtype=torch.float8_e4m3fn)"},
		{&array.Array{DType: array.Int4, Shape: []int{2}, Data: []int8{-8, 7}}, "tensor([-8,  7], dtype=int4)"},
		{array.FromSlice([]int{2}, []uint64{math.MaxUint64, 0}), "tensor([18446744073709551615,                    0], dtype=torch.uint64)"},
	} {
		assert.Equal(t, c.want, Array(c.a), c.a.String())
	}
}

// A strided view prints its own elements, not its backing array's; what
// cannot be printed says what it is.
func TestDenseView(t *testing.T) {
	m := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1.5, 2, 3, 4, 5, 6}))
	v, err := m.Slice(nil, tensor.S(1, 3))
	require.NoError(t, err)
	assert.Equal(t, "tensor([[2., 3.],\n        [5., 6.]])", Dense(v.(*tensor.Dense)))
	assert.Equal(t, "<nil tensor>", Dense(nil))
	assert.Equal(t, "<nil tensor>", Array(nil))
	c := tensor.New(tensor.WithShape(1), tensor.WithBacking([]complex64{1}))
	assert.Equal(t, "<complex64 tensor of shape (1,)>", Dense(c))
	assert.Equal(t, "<array: shape (3,) needs 3 elements, the data has 2>", Array(array.FromSlice([]int{3}, []int64{1, 2})))
}
