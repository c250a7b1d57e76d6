package cli

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFormatTensor(t *testing.T) {
	inf := float32(math.Inf(-1))
	cases := []struct {
		name  string
		data  []float32
		shape []int
		want  string
	}{
		{"vector", []float32{0.1385, 0.2379}, []int{2}, "tensor([0.1385, 0.2379])"},
		{"scalar", []float32{0.9544}, nil, "tensor(0.9544)"},
		{"integers", []float32{2, 7, 6, 4}, []int{2, 2}, "tensor([[2., 7.],\n        [6., 4.]])"},
		{"negatives pad", []float32{-0.0739, 0.0713}, []int{1, 2}, "tensor([[-0.0739,  0.0713]])"},
		{"masked", []float32{0.9231, inf, 1.2705, 1.8524}, []int{2, 2}, "tensor([[0.9231,   -inf],\n        [1.2705, 1.8524]])"},
		{"batch", []float32{1.5, 2, 3, 4}, []int{2, 1, 2}, "tensor([[[1.5000, 2.0000]],\n\n        [[3.0000, 4.0000]]])"},
		{"scientific", []float32{1e-5, 1}, []int{2}, "tensor([1.0000e-05, 1.0000e+00])"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, formatTensor(c.data, c.shape))
		})
	}
}
