package layers

import "fmt"

// positive checks a size field of a layer config.
func positive(field string, v int) error {
	if v <= 0 {
		return fmt.Errorf("%s must be positive, got %d", field, v)
	}
	return nil
}

// probability checks a dropout probability field: [0, 1), and still below
// 1 once rounded to float32, where the kept values are scaled by 1/(1-p).
func probability(field string, p float64) error {
	if !(p >= 0 && float32(p) < 1) {
		return fmt.Errorf("%s must be in [0, 1), got %g", field, p)
	}
	return nil
}

// firstError returns the first non-nil error: Validate reports the first
// rule a config breaks, in field order.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
