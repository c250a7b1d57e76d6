package onnxio

import (
	"fmt"
	"math"

	"github.com/attnrun/attnrun/internal/budget"
)

// ErrLimit is wrapped by every error that refuses input for exceeding a
// Limits field, so that callers can tell "too big" from "malformed"; it is
// tensorio.ErrLimit too.
var ErrLimit = budget.ErrLimit

// Limits bounds what the codec accepts from a file before it allocates
// memory for it; see budget.Limits for the fields, which tensorio.Limits
// shares. A zero field means its DefaultLimits value, a negative one no
// limit (MaxMemory: zero or negative is the default budget of 4 GiB).
type Limits budget.Limits

// DefaultLimits is what ReadModel and the other package-level functions
// use, and what a zero Limits field stands for: 2 GiB per file and per
// tensor (protobuf cannot encode larger messages), 4 GiB of external data
// per model, rank at most 32, and a memory budget of budget.DefaultLimit
// (4 GiB) per call.
var DefaultLimits = Limits{
	MaxFileBytes:   2 << 30,
	MaxTensorBytes: 2 << 30,
	MaxTotalBytes:  4 << 30,
	MaxDims:        32,
}

// resolved returns l with its zero fields defaulted; see budget.Limits.
func (l Limits) resolved() Limits {
	return Limits(budget.Limits(l).Resolved(budget.Limits(DefaultLimits)))
}

// scope returns the reservations of one call: from l.Budget when set, else
// from a fresh budget of MaxMemory bytes.
func (l Limits) scope() *budget.Scope { return budget.Limits(l).Scope() }

// CheckDims validates a shape read from a file and returns its element
// count: every dimension non-negative, the rank within MaxDims, and the
// count times elemBits/8 (rounded up) within MaxTensorBytes, computed without
// overflow. Callers allocate only after it returns nil.
func (l Limits) CheckDims(dims []int64, elemBits int) (elems int64, err error) {
	l = l.resolved()
	if len(dims) > l.MaxDims {
		return 0, fmt.Errorf("rank %d exceeds the limit of %d dims: %w", len(dims), l.MaxDims, ErrLimit)
	}
	elems = 1
	for i, d := range dims {
		if d < 0 {
			return 0, fmt.Errorf("dims[%d] is %d: dimensions must not be negative", i, d)
		}
	}
	for _, d := range dims {
		if d == 0 {
			return 0, nil
		}
		if elems > math.MaxInt64/d {
			return 0, fmt.Errorf("the element count of dims %v overflows int64: %w", dims, ErrLimit)
		}
		elems *= d
	}
	if _, err := l.checkBytes(elems, elemBits); err != nil {
		return 0, err
	}
	return elems, nil
}

// checkBytes returns the storage size of elems elements of elemBits bits
// each (sub-byte types packed, rounded up to whole bytes) and refuses it when
// it exceeds MaxTensorBytes or the address space.
func (l Limits) checkBytes(elems int64, elemBits int) (int64, error) {
	if elemBits <= 0 {
		return 0, nil
	}
	if elems > (math.MaxInt64-7)/int64(elemBits) {
		return 0, fmt.Errorf("%d elements overflow the byte count: %w", elems, ErrLimit)
	}
	n := (elems*int64(elemBits) + 7) / 8
	if n > l.resolved().MaxTensorBytes {
		return 0, fmt.Errorf("%d elements need %d bytes, over the limit of %d bytes per tensor: %w",
			elems, n, l.MaxTensorBytes, ErrLimit)
	}
	if uint64(n) > uint64(math.MaxInt) {
		return 0, fmt.Errorf("%d bytes do not fit this platform's address space: %w", n, ErrLimit)
	}
	return n, nil
}
