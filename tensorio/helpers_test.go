package tensorio

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// pattern builds the tensor testdata/gen.py writes for a shape and dtype:
// element i (row-major) is i*0.25-1.5 for floats, i*3-7 for int64 and
// int32, (i*37)%256 for uint8, that minus 128 for int8, i%3 == 0 for bool.
func pattern(dt tensor.Dtype, shape ...int) *tensor.Dense {
	n := 1
	for _, d := range shape {
		n *= d
	}
	var data any
	switch dt {
	case tensor.Float32:
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(i)*0.25 - 1.5
		}
		data = s
	case tensor.Float64:
		s := make([]float64, n)
		for i := range s {
			s[i] = float64(i)*0.25 - 1.5
		}
		data = s
	case tensor.Int64:
		s := make([]int64, n)
		for i := range s {
			s[i] = int64(i)*3 - 7
		}
		data = s
	case tensor.Int32:
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(i)*3 - 7
		}
		data = s
	case tensor.Uint8:
		s := make([]uint8, n)
		for i := range s {
			s[i] = uint8(i * 37 % 256)
		}
		data = s
	case tensor.Int8:
		s := make([]int8, n)
		for i := range s {
			s[i] = int8(i*37%256 - 128)
		}
		data = s
	case tensor.Bool:
		s := make([]bool, n)
		for i := range s {
			s[i] = i%3 == 0
		}
		data = s
	default:
		panic("pattern: unsupported dtype")
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// allDtypes lists the element types every format round-trips.
var allDtypes = []tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int64, tensor.Int32,
	tensor.Uint8, tensor.Int8, tensor.Bool}

// shapesByRank has one shape for each rank 0 to 4.
var shapesByRank = [][]int{{}, {5}, {2, 3}, {2, 1, 3}, {2, 3, 1, 2}}

// assertSameTensor checks dtype, shape and every element.
func assertSameTensor(t *testing.T, want, got *tensor.Dense, msgAndArgs ...any) {
	t.Helper()
	require.NotNil(t, got, msgAndArgs...)
	assert.Equal(t, want.Dtype(), got.Dtype(), msgAndArgs...)
	assert.Equal(t, []int(want.Shape()), []int(got.Shape()), msgAndArgs...)
	wa, _, err := denseArray(want)
	require.NoError(t, err)
	ga, _, err := denseArray(got)
	require.NoError(t, err)
	assert.Equal(t, wa.Data, ga.Data, msgAndArgs...)
}

func readTestdata(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	require.NoError(t, err)
	return b
}

// writeTemp writes b to a file in a fresh temporary directory.
func writeTemp(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

func npyBytes(t *testing.T, x *tensor.Dense) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteNPY(&buf, x))
	return buf.Bytes()
}
