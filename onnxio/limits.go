package onnxio

import (
	"errors"
	"fmt"
	"math"

	"github.com/attnrun/attnrun/internal/budget"
)

// ErrLimit is wrapped by every error that refuses input for exceeding a
// Limits field, so that callers can tell "too big" from "malformed".
var ErrLimit = errors.New("limit exceeded")

// Limits bounds what the codec accepts from a file before it allocates
// memory for it. Files come from strangers: a 40-byte file can declare a
// tensor of 2^60 elements, so sizes are checked against these numbers first.
// A zero Max*Bytes or MaxDims field means "no limit" for that field (a zero
// MaxMemory means the default budget); DefaultLimits suits models up to
// protobuf's own 2 GiB message size.
type Limits struct {
	// MaxFileBytes caps the size of an .onnx or .pb file read into memory.
	MaxFileBytes int64
	// MaxTensorBytes caps the data of one tensor: its element count times
	// its element size, whether stored inline, externally, or allocated on
	// conversion.
	MaxTensorBytes int64
	// MaxExternalBytes caps the external data loaded for one model, all
	// tensors together.
	MaxExternalBytes int64
	// MaxDims caps a tensor's rank.
	MaxDims int

	// MaxMemory is the memory budget of one call, in bytes: what it reads
	// into memory (the file, external data, the tensors of a test-data
	// set, a TensorToDense result) is reserved from it before it is
	// allocated, and the reservations add up within the call. Unlike the
	// fields above, zero means budget.DefaultLimit (4 GiB), never "no
	// limit". Exceeding it is an error matching budget.ErrExceeded.
	MaxMemory int64
	// Budget, when set, is the budget a call reserves from instead of a
	// fresh one of MaxMemory bytes, so that one budget can bound a whole
	// command. A call holds its reservations while it runs and releases
	// them when it returns.
	Budget *budget.Budget
	// ExternalSizesOnly makes ReadModel and DecodeModel check external
	// data without reading it: each entry's location (inside the model's
	// directory, a regular file), offset and length (within the file,
	// matching the tensor's shape). Tensors keep their external_data
	// entries, and neither MaxExternalBytes nor the budget applies, since
	// nothing is loaded. For describing a model (shapes, parameter counts)
	// without loading its weights.
	ExternalSizesOnly bool
}

// DefaultLimits is what ReadModel and the other package-level functions use:
// 2 GiB per file (protobuf cannot encode larger messages), 2 GiB per tensor,
// 4 GiB of external data per model, rank at most 32, and a memory budget of
// budget.DefaultLimit (4 GiB) per call.
var DefaultLimits = Limits{
	MaxFileBytes:     2 << 30,
	MaxTensorBytes:   2 << 30,
	MaxExternalBytes: 4 << 30,
	MaxDims:          32,
}

// scope returns the reservations of one call: from l.Budget when set, else
// from a fresh budget of MaxMemory bytes.
func (l Limits) scope() *budget.Scope {
	if l.Budget != nil {
		return budget.NewScope(l.Budget)
	}
	return budget.NewScope(budget.New(l.MaxMemory))
}

// CheckDims validates a shape read from a file and returns its element
// count: every dimension non-negative, the rank within MaxDims, and the
// count times elemBits/8 (rounded up) within MaxTensorBytes, computed without
// overflow. Callers allocate only after it returns nil.
func (l Limits) CheckDims(dims []int64, elemBits int) (elems int64, err error) {
	if l.MaxDims > 0 && len(dims) > l.MaxDims {
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
	if l.MaxTensorBytes > 0 && n > l.MaxTensorBytes {
		return 0, fmt.Errorf("%d elements need %d bytes, over the limit of %d bytes per tensor: %w",
			elems, n, l.MaxTensorBytes, ErrLimit)
	}
	if uint64(n) > uint64(math.MaxInt) {
		return 0, fmt.Errorf("%d bytes do not fit this platform's address space: %w", n, ErrLimit)
	}
	return n, nil
}
