package budget

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLimitsResolved checks the one meaning of a Limits field in every
// reader: zero takes the default, negative (or a zero default) is no
// limit, anything else stays.
func TestLimitsResolved(t *testing.T) {
	defaults := Limits{MaxFileBytes: 10, MaxTensorBytes: 20, MaxDims: 3}
	got := Limits{MaxTensorBytes: -1, MaxDims: 5, MaxMemory: 7}.Resolved(defaults)
	assert.Equal(t, Limits{
		MaxFileBytes:   10,            // zero: the default
		MaxTensorBytes: math.MaxInt64, // negative: no limit
		MaxTotalBytes:  math.MaxInt64, // zero, with a zero default: no limit
		MaxDims:        5,             // set: kept
		MaxMemory:      7,             // not a size cap: untouched
	}, got)
}
