package attnmath

import "github.com/attnrun/attnrun/internal/kernels"

// Softmax replaces each of the rows of x (n wide, dense) by its softmax,
// as torch.softmax(x, dim=-1) does: exp(x − max) / Σ exp(x − max). A row
// that holds a NaN or a +Inf, or nothing but −Inf, becomes all NaN, as in
// PyTorch; a −Inf elsewhere gives a weight of 0, which is how a mask of
// −Inf hides an entry.
func Softmax(x []float32, rows, n int) error {
	if err := operand("Softmax", "x", x, "rows×n", rows, n); err != nil {
		return err
	}
	if rows == 0 || n == 0 {
		return nil
	}
	kernels.SoftmaxRows(x, rows, n)
	return nil
}
