package attnmath

import "github.com/attnrun/attnrun/internal/kernels"

// Linear computes y = x·Wᵀ + b for each of the rows of x, as nn.Linear
// (F.linear) does. x is rows×in, w is out×in (nn.Linear stores its weight
// (out_features, in_features)), b holds out values or is nil for no bias,
// and y is rows×out. All are dense and row-major; y must not overlap x,
// w or b. Large products run on all processors.
func Linear(y, x, w, b []float32, rows, in, out int) error {
	const fn = "Linear"
	if err := operand(fn, "x", x, "rows×in", rows, in); err != nil {
		return err
	}
	if err := operand(fn, "w", w, "out×in", out, in); err != nil {
		return err
	}
	if err := operand(fn, "y", y, "rows×out", rows, out); err != nil {
		return err
	}
	if b != nil {
		if err := operand(fn, "b", b, "out", out); err != nil {
			return err
		}
	}
	if rows == 0 || out == 0 {
		return nil
	}
	if in == 0 { // an empty sum: the bias alone
		for r := range rows {
			row := y[r*out : (r+1)*out]
			if b == nil {
				clear(row)
			} else {
				copy(row, b[:out])
			}
		}
		return nil
	}
	kernels.Linear(y, x, w, b, rows, in, out)
	return nil
}
