package attnmath

import (
	"fmt"
	"math"
)

// product multiplies sizes, reporting false if one is negative or the
// product overflows an int.
func product(sizes ...int) (int, bool) {
	n := 1
	for _, s := range sizes {
		if s < 0 {
			return 0, false
		}
		if s != 0 && n > math.MaxInt/s {
			return 0, false
		}
		n *= s
	}
	return n, true
}

// operand checks that s holds the product of dims floats; fn and name
// are for the error, layout says what the dims are ("rows×in").
func operand(fn, name string, s []float32, layout string, dims ...int) error {
	need, ok := product(dims...)
	if !ok {
		return fmt.Errorf("attnmath.%s: %s of %s = %s is negative or overflows", fn, name, layout, sizes(dims))
	}
	if len(s) < need {
		return fmt.Errorf("attnmath.%s: %s holds %d floats, %s = %s needs %d", fn, name, len(s), layout, sizes(dims), need)
	}
	return nil
}

// sizes writes dims as 2×3×4.
func sizes(dims []int) string {
	s := ""
	for i, d := range dims {
		if i > 0 {
			s += "×"
		}
		s += fmt.Sprint(d)
	}
	return s
}
