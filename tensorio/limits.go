package tensorio

import (
	"fmt"
	"github.com/attnrun/attnrun/array"
	"math"

	"github.com/attnrun/attnrun/internal/budget"
)

// ErrLimit is wrapped by every error that rejects a file for exceeding a
// Limits bound, so callers can tell "too big" from "malformed"; it is
// onnxio.ErrLimit too.
var ErrLimit = budget.ErrLimit

// Limits bounds what the readers accept from a file. Sizes read from a file
// are checked against them before anything is allocated, so a hostile or
// corrupted file cannot make a reader exhaust memory. It is the type of
// onnxio.Limits (see budget.Limits for the fields): the readers here use
// MaxTensorBytes (one tensor), MaxTotalBytes (all the tensors one call
// returns, decoded into Go values), MaxDims, MaxMemory and Budget. A zero
// field means its DefaultLimits value, a negative one no limit.
type Limits budget.Limits

// DefaultLimits are the bounds the package-level read functions use, and
// what a zero Limits field stands for: 4 GiB of tensor data per call (one
// tensor or all of them), rank at most 8, and the default memory budget.
var DefaultLimits = Limits{MaxTensorBytes: 4 << 30, MaxTotalBytes: 4 << 30, MaxDims: 8}

// scope returns the reservations of one call: from l.Budget when set, else
// from a fresh budget of MaxMemory bytes.
func (l Limits) scope() *budget.Scope { return budget.Limits(l).Scope() }

// resolved returns l with its zero fields defaulted; see budget.Limits.
func (l Limits) resolved() Limits {
	return Limits(budget.Limits(l).Resolved(budget.Limits(DefaultLimits)))
}

// room is what the next tensor may take: at most MaxTensorBytes, and no
// more than left, what remains of MaxTotalBytes. l is resolved.
func (l Limits) room(left int64) int64 { return min(l.MaxTensorBytes, left) }

// checkShape validates a shape read from a file and returns its number of
// elements, as checkArrayShape does; a shape of zero elements, which
// *tensor.Dense cannot hold, is refused.
func checkShape(shape []int64, elemSize int, maxRank int, room int64) (int, error) {
	n, err := checkArrayShape(shape, elemSize, maxRank, room)
	if err == nil && n == 0 {
		return 0, fmt.Errorf("shape %s has no elements (empty tensors are not supported)", array.FormatShape(shape))
	}
	return n, err
}

// checkArrayShape validates a shape read from a file and returns its
// number of elements, which may be 0. elemSize is the size of one element
// once decoded into Go. room is how many bytes the caller may
// still allocate.
func checkArrayShape(shape []int64, elemSize int, maxRank int, room int64) (int, error) {
	if len(shape) > maxRank {
		return 0, fmt.Errorf("shape %s has rank %d, more than the limit %d: %w",
			array.FormatShape(shape), len(shape), maxRank, ErrLimit)
	}
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %s has a negative dimension", array.FormatShape(shape))
		}
		if d == 0 {
			n = 0
		}
	}
	for _, d := range shape {
		if n == 0 {
			break
		}
		if n > math.MaxInt64/d {
			return 0, fmt.Errorf("shape %s has more elements than fit in 64 bits: %w", array.FormatShape(shape), ErrLimit)
		}
		n *= d
	}
	if n > room/int64(elemSize) {
		return 0, fmt.Errorf("shape %s needs more than the limit of %d bytes: %w", array.FormatShape(shape), room, ErrLimit)
	}
	if n > math.MaxInt {
		return 0, fmt.Errorf("shape %s has more elements than this platform can index: %w", array.FormatShape(shape), ErrLimit)
	}
	return int(n), nil
}
