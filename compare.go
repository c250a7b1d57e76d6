package attnrun

import (
	"fmt"
	"math"
	"reflect"
	"slices"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
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
	// tolerance (for an Exact comparison, the first that differs), or -1
	// when every element is within it.
	Worst int
	// Elements is the number of elements compared.
	Elements int
	// RTol and ATol are the tolerances the comparison used: the caller's,
	// raised to the epsilon of a float type narrower than float32, or 0
	// for an Exact comparison.
	RTol, ATol float64
	// Exact is set when both sides hold integers or bools, which must be
	// equal whatever the tolerances.
	Exact bool
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
// float32 result against a float64 reference); numbers are compared by
// value, and integer or bool tensors on both sides must be equal (Exact).
// Shapes that differ are an error.
func Compare(got, want *tensor.Dense, rtol, atol float64) (Comparison, error) {
	if got == nil || want == nil {
		return Comparison{Worst: -1}, fmt.Errorf("compare: a tensor is nil")
	}
	if !got.Shape().Eq(want.Shape()) {
		return Comparison{Worst: -1}, fmt.Errorf("compare: shape %s, the reference has %s", shapeText(got), shapeText(want))
	}
	g, err := array.FromDense(got)
	if err != nil {
		return Comparison{Worst: -1}, fmt.Errorf("compare: %w", err)
	}
	w, err := array.FromDense(want)
	if err != nil {
		return Comparison{Worst: -1}, fmt.Errorf("compare: reference: %w", err)
	}
	return CompareArrays(g, w, rtol, atol)
}

// CompareArrays measures got against want as Compare does, for Arrays:
// every element type, and tensors of zero elements, which are equal when
// their shapes are. Integers and bools on both sides are compared exactly,
// beyond 2^53 too. For float16, bfloat16 and the float8 and float4 types,
// rtol and atol are at least the type's epsilon (2^-10 for float16): a
// result of magnitude 1 computed in float32 and rounded to the type once
// can differ from another correct result by that much.
func CompareArrays(got, want *array.Array, rtol, atol float64) (Comparison, error) {
	c := Comparison{Worst: -1, Elements: want.Len()}
	if err := got.Check(); err != nil {
		return c, err
	}
	if err := want.Check(); err != nil {
		return c, fmt.Errorf("reference: %w", err)
	}
	if !slices.Equal(got.Shape, want.Shape) {
		return c, fmt.Errorf("shape %s, want %s", array.FormatShape(got.Shape), array.FormatShape(want.Shape))
	}
	c.Exact = !got.DType.IsFloat() && !want.DType.IsFloat()
	if c.Exact {
		rtol, atol = 0, 0
	}
	for _, dt := range [...]array.DType{got.DType, want.DType} {
		if dt.IsFloat() && dt.IsNarrow() {
			rtol, atol = math.Max(rtol, dt.Epsilon()), math.Max(atol, dt.Epsilon())
		}
	}
	c.RTol, c.ATol = rtol, atol
	g, w := floatAt(got), floatAt(want)
	same := func(i int) bool { return g(i) == w(i) || math.IsNaN(g(i)) && math.IsNaN(w(i)) }
	if c.Exact {
		gi, wi := integerAt(got), integerAt(want)
		same = func(i int) bool { return gi(i) == wi(i) }
	}
	worstExcess := 0.0
	for i := range c.Elements {
		if same(i) {
			continue
		}
		a, b := g(i), w(i)
		diff := orInf(math.Abs(a - b)) // NaN against a number, or ±Inf against another value
		c.MaxAbs = math.Max(c.MaxAbs, diff)
		if b != 0 {
			c.MaxRel = math.Max(c.MaxRel, orInf(diff/math.Abs(b)))
		}
		limit := atol + rtol*math.Abs(b)
		if !c.Exact && diff <= limit && !math.IsInf(diff, 1) {
			continue
		}
		c.Mismatches++
		if excess := orInf(diff - limit); c.Worst < 0 || !c.Exact && excess > worstExcess {
			worstExcess, c.Worst = excess, i
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

// floatAt reads the elements of a checked Array as float64 (a bool as 0
// or 1), without copying them.
func floatAt(a *array.Array) func(i int) float64 {
	switch d := a.Data.(type) {
	case []float32:
		return func(i int) float64 { return float64(d[i]) }
	case []float64:
		return func(i int) float64 { return d[i] }
	}
	at := integerAt(a)
	return func(i int) float64 { return at(i).float() }
}

// integer is an integer element, exactly: its sign and magnitude.
type integer struct {
	negative  bool
	magnitude uint64
}

func (n integer) float() float64 {
	if n.negative {
		return -float64(n.magnitude)
	}
	return float64(n.magnitude)
}

// integerAt reads the elements of a checked Array of integers or bools
// exactly (a bool as 0 or 1).
func integerAt(a *array.Array) func(i int) integer {
	v := reflect.ValueOf(a.Data)
	return func(i int) integer {
		switch x := v.Index(i); {
		case x.CanInt():
			if n := x.Int(); n < 0 {
				return integer{true, uint64(-n)} // -MinInt64 wraps to 2^63, its magnitude
			}
			return integer{false, uint64(x.Int())}
		case x.CanUint():
			return integer{false, x.Uint()}
		case x.Bool():
			return integer{false, 1}
		}
		return integer{}
	}
}

// shapeText writes a shape as PyTorch writes torch.Size: (2, 3), () for a scalar.
func shapeText(t *tensor.Dense) string {
	if t.IsScalar() {
		return "()"
	}
	return models.FormatShape(t.Shape())
}
