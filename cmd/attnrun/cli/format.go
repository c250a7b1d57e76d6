package cli

import "github.com/attnrun/attnrun/internal/tensorfmt"

// formatTensor prints values of the given shape the way PyTorch prints a
// float32 tensor, so that output can be compared with a notebook by eye:
//
//	tensor([[0.4421, 0.5931],
//	        [0.4419, 0.6515]])
//
// The rules (notation, widths, wrapping at 80 columns, summarizing above
// 1000 elements) are PyTorch's; internal/tensorfmt holds them and their
// test against PyTorch's own printouts.
func formatTensor(data []float32, shape []int) string {
	return tensorfmt.Float32(data, shape)
}
