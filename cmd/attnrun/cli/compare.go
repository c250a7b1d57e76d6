package cli

import (
	"fmt"
	"math"
	"reflect"
	"slices"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
)

// comparison is how far a result is from its reference.
type comparison struct {
	maxAbs, maxRel float64
	// worst is the index of the element furthest outside the tolerance.
	worst int
	ok    bool
	// rtol and atol are the tolerances applied: the caller's, widened to
	// the element type's own for the floats narrower than float32.
	rtol, atol float64
	// exact is set for integer and bool outputs, which must be equal;
	// mismatches counts the elements that are not.
	exact      bool
	mismatches int
}

// compare checks got against want as compareArrays does.
func compare(got, want *tensor.Dense, rtol, atol float64) (comparison, error) {
	g, err := array.FromDense(got)
	if err != nil {
		return comparison{}, err
	}
	w, err := array.FromDense(want)
	if err != nil {
		return comparison{}, err
	}
	return compareArrays(g, w, rtol, atol)
}

// compareArrays checks got against want. Element types and shapes must
// match exactly; tensors of zero elements are equal when their shapes are.
// Integers and bools must be equal. Floats are compared elementwise as
// numpy.allclose does: |got − want| ≤ atol + rtol·|want|, with NaN equal
// to NaN and infinities equal only to themselves. For float16, bfloat16
// and the float8 and float4 types, rtol and atol are at least the type's
// epsilon (2^-10 for float16): a result of magnitude 1 that was computed
// in float32 and rounded to the type once can differ from another correct
// result by that much.
func compareArrays(got, want *array.Array, rtol, atol float64) (comparison, error) {
	if got.DType != want.DType {
		return comparison{}, fmt.Errorf("dtype %s, want %s", got.DType, want.DType)
	}
	if !slices.Equal(got.Shape, want.Shape) {
		return comparison{}, fmt.Errorf("shape %s, want %s", array.FormatShape(got.Shape), array.FormatShape(want.Shape))
	}
	if err := got.Check(); err != nil {
		return comparison{}, err
	}
	if err := want.Check(); err != nil {
		return comparison{}, err
	}
	if want.DType.IsNarrow() && want.DType.IsFloat() {
		eps := want.DType.Epsilon()
		rtol, atol = math.Max(rtol, eps), math.Max(atol, eps)
	}
	c := comparison{ok: true, worst: -1, rtol: rtol, atol: atol}
	if !want.DType.IsFloat() {
		c.exact = true
		compareExactly(&c, reflect.ValueOf(got.Data), reflect.ValueOf(want.Data))
		return c, nil
	}
	g, w := reflect.ValueOf(got.Data), reflect.ValueOf(want.Data)
	worstExcess := 0.0
	for i := range w.Len() {
		a, b := g.Index(i).Float(), w.Index(i).Float()
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

// compareExactly compares integer or bool elements for equality, exactly
// (int64 and uint64 beyond 2^53 included); the worst element is the first
// that differs.
func compareExactly(c *comparison, g, w reflect.Value) {
	for i := range w.Len() {
		a, b := g.Index(i), w.Index(i)
		if a.Equal(b) {
			continue
		}
		c.ok = false
		c.mismatches++
		if c.worst < 0 {
			c.worst = i
		}
		if diff := math.Abs(asNumber(a) - asNumber(b)); diff > c.maxAbs {
			c.maxAbs = diff
		}
	}
}

// asNumber is an integer or bool element as a float64, for reports.
func asNumber(v reflect.Value) float64 {
	switch {
	case v.CanInt():
		return float64(v.Int())
	case v.CanUint():
		return float64(v.Uint())
	case v.Kind() == reflect.Bool && v.Bool():
		return 1
	}
	return 0
}

// element formats element i of a for reports.
func element(a *array.Array, i int) string {
	return fmt.Sprint(reflect.ValueOf(a.Data).Index(i).Interface())
}
