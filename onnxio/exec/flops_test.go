package exec

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProductFLOPs(t *testing.T) {
	cases := []struct {
		name  string
		op    string
		trans [2]bool
		a, b  []int
		want  float64
	}{
		{"matrices", "MatMul", [2]bool{}, []int{3, 4}, []int{4, 5}, 2 * 3 * 4 * 5},
		{"batched by a matrix", "MatMul", [2]bool{}, []int{2, 7, 3, 4}, []int{4, 5}, 2 * 14 * 3 * 4 * 5},
		{"broadcast batch", "MatMul", [2]bool{}, []int{2, 1, 3, 4}, []int{6, 4, 5}, 2 * 12 * 3 * 4 * 5},
		{"vector times matrix", "MatMul", [2]bool{}, []int{4}, []int{4, 5}, 2 * 4 * 5},
		{"matrix times vector", "MatMul", [2]bool{}, []int{3, 4}, []int{4}, 2 * 3 * 4},
		{"gemm", "Gemm", [2]bool{}, []int{3, 4}, []int{4, 5}, 2 * 3 * 4 * 5},
		{"gemm transposed", "Gemm", [2]bool{true, true}, []int{4, 3}, []int{5, 4}, 2 * 3 * 4 * 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := productFLOPs(c.op, c.trans, c.a, c.b)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
	_, err := productFLOPs("Gemm", [2]bool{}, []int{2, 3, 4}, []int{4, 5})
	assert.ErrorContains(t, err, "want matrices")
	_, err = productFLOPs("MatMul", [2]bool{}, []int{}, []int{4, 5})
	assert.ErrorContains(t, err, "scalar operand")
}

// TestCountFLOPs counts a graph whose MatMul operands are intermediates
// (ConstantOfShape's n×n ones), which only a run shows, and leaves the
// model as it was.
func TestCountFLOPs(t *testing.T) {
	m := squareMatMul(t, 6)
	outputs := len(m.GetGraph().GetOutput())
	got, err := CountFLOPs(context.Background(), m, nil, Options{})
	require.NoError(t, err)
	assert.Equal(t, FLOPCount{FLOPs: 2 * 6 * 6 * 6}, got)
	assert.Len(t, m.GetGraph().GetOutput(), outputs, "m is not modified")
}
