package cli

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
)

// comparison is how far a result is from its reference.
type comparison struct {
	maxAbs, maxRel float64
	// worst is the index of the element furthest outside the tolerance.
	worst int
	ok    bool
}

// compare checks got against want elementwise as numpy.allclose does:
// |got − want| ≤ atol + rtol·|want|, with NaN equal to NaN and infinities
// equal only to themselves. Shapes and dtypes must match exactly.
func compare(got, want *tensor.Dense, rtol, atol float64) (comparison, error) {
	if got.Dtype() != want.Dtype() {
		return comparison{}, fmt.Errorf("dtype %v, want %v", got.Dtype(), want.Dtype())
	}
	if !got.Shape().Eq(want.Shape()) {
		return comparison{}, fmt.Errorf("shape %v, want %v", shapeOf(got), shapeOf(want))
	}
	g, err := asFloat64(got)
	if err != nil {
		return comparison{}, err
	}
	w, err := asFloat64(want)
	if err != nil {
		return comparison{}, err
	}
	c := comparison{ok: true, worst: -1}
	worstExcess := 0.0
	for i := range w {
		a, b := g[i], w[i]
		if math.IsNaN(a) && math.IsNaN(b) || a == b {
			continue
		}
		diff := math.Abs(a - b)
		if math.IsNaN(diff) {
			diff = math.Inf(1)
		}
		c.maxAbs = math.Max(c.maxAbs, diff)
		if b != 0 {
			c.maxRel = math.Max(c.maxRel, diff/math.Abs(b))
		}
		if excess := diff - (atol + rtol*math.Abs(b)); excess > 0 {
			c.ok = false
			if excess > worstExcess || c.worst < 0 {
				worstExcess, c.worst = excess, i
			}
		}
	}
	return c, nil
}

func shapeOf(t *tensor.Dense) string {
	if t.IsScalar() {
		return "()"
	}
	return models.FormatShape(t.Shape())
}
