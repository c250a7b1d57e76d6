package tensorio

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/attnrun/attnrun/internal/budget"
)

// ErrLimit is wrapped by every error that rejects a file for exceeding a
// Limits bound, so callers can tell "too big" from "malformed".
var ErrLimit = errors.New("limit exceeded")

// Limits bounds what the readers accept from a file. Sizes read from a file
// are checked against them before anything is allocated, so a hostile or
// corrupted file cannot make a reader exhaust memory. A zero field means the
// default.
type Limits struct {
	// MaxBytes is the largest amount of tensor data, decoded into Go
	// values, that one call may return: one .npy, or all the tensors of an
	// .npz or .safetensors file together.
	MaxBytes int64
	// MaxRank is the largest number of dimensions of a tensor.
	MaxRank int

	// MaxMemory is the memory budget of one call, in bytes: every tensor
	// it decodes is reserved from it before it is allocated, and the
	// reservations add up within the call. Zero means budget.DefaultLimit
	// (4 GiB). Exceeding it is an error matching budget.ErrExceeded.
	MaxMemory int64
	// Budget, when set, is the budget a call reserves from instead of a
	// fresh one of MaxMemory bytes, so that one budget can bound a whole
	// command. A call holds its reservations while it runs and releases
	// them when it returns.
	Budget *budget.Budget
}

// scope returns the reservations of one call: from l.Budget when set, else
// from a fresh budget of MaxMemory bytes.
func (l Limits) scope() *budget.Scope {
	if l.Budget != nil {
		return budget.NewScope(l.Budget)
	}
	return budget.NewScope(budget.New(l.MaxMemory))
}

// DefaultLimits are the bounds the package-level read functions use: 4 GiB
// of tensor data and rank 8.
var DefaultLimits = Limits{MaxBytes: 4 << 30, MaxRank: 8}

// withDefaults fills the zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxRank <= 0 {
		l.MaxRank = DefaultLimits.MaxRank
	}
	return l
}

// checkShape validates a shape read from a file and returns its number of
// elements. elemSize is the size of one element once decoded into Go.
// room is how many bytes of MaxBytes the caller may still allocate.
func checkShape(shape []int64, elemSize int, maxRank int, room int64) (int, error) {
	if len(shape) > maxRank {
		return 0, fmt.Errorf("shape %s has rank %d, more than the limit %d: %w",
			formatShape(shape), len(shape), maxRank, ErrLimit)
	}
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %s has a negative dimension", formatShape(shape))
		}
		if d == 0 {
			return 0, fmt.Errorf("shape %s has no elements (empty tensors are not supported)", formatShape(shape))
		}
		if n > math.MaxInt64/d {
			return 0, fmt.Errorf("shape %s has more elements than fit in 64 bits: %w", formatShape(shape), ErrLimit)
		}
		n *= d
	}
	if n > room/int64(elemSize) {
		return 0, fmt.Errorf("shape %s needs more than the limit of %d bytes: %w", formatShape(shape), room, ErrLimit)
	}
	if n > math.MaxInt {
		return 0, fmt.Errorf("shape %s has more elements than this platform can index: %w", formatShape(shape), ErrLimit)
	}
	return int(n), nil
}

// formatShape writes a shape as Python prints a tuple: (), (3,), (2, 3).
func formatShape(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatInt(d, 10)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
