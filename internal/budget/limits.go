package budget

import (
	"errors"
	"math"
)

// ErrLimit is wrapped by every error that refuses a file for exceeding a
// Limits field, so that callers can tell "too big" from "malformed".
var ErrLimit = errors.New("limit exceeded")

// Limits bounds what a reader accepts from a file before it allocates
// memory for it: onnxio.Limits and tensorio.Limits are this type. Files come
// from strangers: a 40-byte file can declare a tensor of 2^60 elements, so
// sizes are checked against these numbers first.
//
// Every field means the same in both packages: zero takes the value of the
// package's DefaultLimits (its formats' sizes differ: protobuf caps an ONNX
// tensor at 2 GiB, a NumPy array has no such cap), a negative value means
// no limit. MaxMemory aside: zero or negative is DefaultLimit, never "no
// limit".
type Limits struct {
	// MaxFileBytes caps the size of a file read into memory whole (an
	// .onnx or .pb file).
	MaxFileBytes int64
	// MaxTensorBytes caps the data of one tensor: its element count times
	// its element size, whether stored inline, externally, or allocated on
	// conversion.
	MaxTensorBytes int64
	// MaxTotalBytes caps the tensor data one call loads, all tensors
	// together: an ONNX model's external data, the arrays of an .npz or
	// the tensors of a .safetensors file.
	MaxTotalBytes int64
	// MaxDims caps a tensor's rank.
	MaxDims int

	// MaxMemory is the memory budget of one call, in bytes: what it reads
	// into memory (the file, external data, the tensors it decodes) is
	// reserved from it before it is allocated, and the reservations add up
	// within the call. Exceeding it is an error matching ErrExceeded.
	MaxMemory int64
	// Budget, when set, is the budget a call reserves from instead of a
	// fresh one of MaxMemory bytes, so that one budget can bound a whole
	// command. A call holds its reservations while it runs and releases
	// them when it returns.
	Budget *Budget
	// ExternalSizesOnly makes the ONNX model readers check external data
	// without reading it: each entry's location (inside the model's
	// directory, a regular file), offset and length (within the file,
	// matching the tensor's shape). Tensors keep their external_data
	// entries, and neither MaxTotalBytes nor the budget applies, since
	// nothing is loaded. For describing a model (shapes, parameter counts)
	// without loading its weights.
	ExternalSizesOnly bool
}

// Resolved returns l with every zero field taken from defaults and every
// negative one (no limit; so is a zero default) set to the largest value,
// so that readers compare sizes against the fields without further cases.
func (l Limits) Resolved(defaults Limits) Limits {
	l.MaxFileBytes = resolve(l.MaxFileBytes, defaults.MaxFileBytes, math.MaxInt64)
	l.MaxTensorBytes = resolve(l.MaxTensorBytes, defaults.MaxTensorBytes, math.MaxInt64)
	l.MaxTotalBytes = resolve(l.MaxTotalBytes, defaults.MaxTotalBytes, math.MaxInt64)
	l.MaxDims = resolve(l.MaxDims, defaults.MaxDims, math.MaxInt)
	return l
}

// resolve is one field of Resolved.
func resolve[T int | int64](v, def, unlimited T) T {
	if v == 0 {
		v = def
	}
	if v <= 0 {
		return unlimited
	}
	return v
}

// Scope returns the reservations of one call: from l.Budget when set, else
// from a fresh budget of MaxMemory bytes.
func (l Limits) Scope() *Scope {
	if l.Budget != nil {
		return NewScope(l.Budget)
	}
	return NewScope(New(l.MaxMemory))
}
