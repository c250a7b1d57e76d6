package registry

import (
	"testing"

	"github.com/attnrun/attnrun/array"
)

// TestFormatShapeIsArrays holds registry's copy of the shape formatter to
// array.FormatShape, so that every message of attnrun prints shapes alike.
func TestFormatShapeIsArrays(t *testing.T) {
	for _, s := range [][]int{nil, {}, {3}, {2, 3}, {1, 0, 4, 5}} {
		if got, want := formatShape(s), array.FormatShape(s); got != want {
			t.Errorf("formatShape(%v) = %q, array.FormatShape = %q", s, got, want)
		}
	}
}
