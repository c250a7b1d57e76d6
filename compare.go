package attnrun

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
)

// Comparison is how far a result is from its reference, element by
// element, as Compare measures it.
type Comparison struct {
	// MaxAbs is the largest |got − want|, +Inf where one holds a NaN or an
	// infinity the other does not have at that place.
	MaxAbs float64
	// MaxRel is the largest |got − want| / |want| over the elements where
	// want is not 0 (+Inf as for MaxAbs).
	MaxRel float64
	// Mismatches counts the elements outside the tolerance.
	Mismatches int
	// Worst is the flat index of the element furthest outside the
	// tolerance, or -1 when every element is within it.
	Worst int
	// Elements is the number of elements compared.
	Elements int
	// RTol and ATol are the tolerances the comparison used.
	RTol, ATol float64
}

// OK reports whether every element is within the tolerance.
func (c Comparison) OK() bool { return c.Mismatches == 0 }

// String summarizes the comparison on one line.
func (c Comparison) String() string {
	verdict := "all close"
	if !c.OK() {
		verdict = fmt.Sprintf("%d of %d outside the tolerance (worst at element %d)", c.Mismatches, c.Elements, c.Worst)
	}
	return fmt.Sprintf("%s: max abs error %.3g, max rel error %.3g (rtol %g, atol %g)", verdict, c.MaxAbs, c.MaxRel, c.RTol, c.ATol)
}

// Compare measures got against a reference want of the same shape, as
// torch.testing.assert_close(got, want, rtol, atol, equal_nan=True) judges
// them: an element is close when |got − want| ≤ atol + rtol·|want|; a NaN
// matches only a NaN, and an infinity only the same infinity. Getting NaN
// and infinities in the same places is part of agreeing with PyTorch
// (attnrun's README, "NaN and infinities"). The dtypes may differ (a
// float32 result against a float64 reference); any numeric dtype is
// compared by value. Shapes that differ are an error.
func Compare(got, want *tensor.Dense, rtol, atol float64) (Comparison, error) {
	c := Comparison{Worst: -1, RTol: rtol, ATol: atol}
	if got == nil || want == nil {
		return c, fmt.Errorf("compare: a tensor is nil")
	}
	if !got.Shape().Eq(want.Shape()) {
		return c, fmt.Errorf("compare: shape %s, the reference has %s", shapeText(got), shapeText(want))
	}
	g, err := values(got)
	if err != nil {
		return c, fmt.Errorf("compare: %w", err)
	}
	w, err := values(want)
	if err != nil {
		return c, fmt.Errorf("compare: reference: %w", err)
	}
	c.Elements = len(w)
	worstExcess := 0.0
	for i, b := range w {
		a := g[i]
		if a == b || math.IsNaN(a) && math.IsNaN(b) {
			continue
		}
		diff := math.Abs(a - b)
		if math.IsNaN(diff) { // a NaN against a number, or ±Inf against another value
			diff = math.Inf(1)
		}
		c.MaxAbs = math.Max(c.MaxAbs, diff)
		if b != 0 {
			c.MaxRel = math.Max(c.MaxRel, orInf(diff/math.Abs(b)))
		}
		limit := atol + rtol*math.Abs(b)
		if diff > limit || math.IsInf(diff, 1) {
			c.Mismatches++
			if excess := orInf(diff - limit); c.Worst < 0 || excess > worstExcess {
				worstExcess, c.Worst = excess, i
			}
		}
	}
	return c, nil
}

// AllClose reports whether got and want have the same shape and every
// element is close, by Compare's rule: |got − want| ≤ atol + rtol·|want|,
// NaN equal to NaN, infinities equal to themselves. attnrun's tests hold
// float32 results to rtol 1e-5 and atol 1e-6 against PyTorch.
func AllClose(got, want *tensor.Dense, rtol, atol float64) bool {
	c, err := Compare(got, want, rtol, atol)
	return err == nil && c.OK()
}

// orInf turns the NaN of ∞/∞ or ∞−∞ into +Inf: an error that large.
func orInf(x float64) float64 {
	if math.IsNaN(x) {
		return math.Inf(1)
	}
	return x
}

// values returns a tensor's elements as float64, in row-major order.
func values(t *tensor.Dense) ([]float64, error) {
	if t.RequiresIterator() {
		dense, ok := t.Materialize().(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("a strided view of shape %s could not be copied", shapeText(t))
		}
		t = dense
	}
	n := t.Shape().TotalSize()
	data := t.Data()
	if t.IsScalar() {
		n = 1
	}
	switch d := data.(type) {
	case []float32:
		return widen(d[:n]), nil
	case []float64:
		return d[:n], nil
	case []int64:
		return widen(d[:n]), nil
	case []int32:
		return widen(d[:n]), nil
	case []int16:
		return widen(d[:n]), nil
	case []int8:
		return widen(d[:n]), nil
	case []uint8:
		return widen(d[:n]), nil
	case float32:
		return []float64{float64(d)}, nil
	case float64:
		return []float64{d}, nil
	case int64:
		return []float64{float64(d)}, nil
	}
	return nil, fmt.Errorf("dtype %v is not numeric", t.Dtype())
}

func widen[T float32 | int64 | int32 | int16 | int8 | uint8](s []T) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = float64(v)
	}
	return out
}

// shapeText writes a shape as PyTorch writes torch.Size: (2, 3), () for a scalar.
func shapeText(t *tensor.Dense) string {
	if t.IsScalar() {
		return "()"
	}
	return models.FormatShape(t.Shape())
}
