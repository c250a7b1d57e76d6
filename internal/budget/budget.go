// Package budget bounds the memory that work sized by a file may allocate.
//
// Files come from strangers: a 122-byte ONNX file can ask for a 16 GiB
// tensor, a YAML line for a billion attention heads. Every allocation whose
// size is derived from a file (an executor value, a broadcast result, a
// parameter, external data, a test-data tensor) first reserves its bytes
// from one Budget, so that an oversized request becomes an error naming
// what asked and how much, instead of a fatal out-of-memory crash that no
// recover can catch.
package budget

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
)

// DefaultLimit is the budget used when none is given: 4 GiB.
const DefaultLimit int64 = 4 << 30

// ErrExceeded is matched (errors.Is) by every error a Budget returns.
var ErrExceeded = errors.New("memory budget exceeded")

// Budget tracks the bytes reserved against a limit. It is safe for
// concurrent use. A nil *Budget applies DefaultLimit to each reservation on
// its own, tracking nothing.
type Budget struct {
	limit int64
	used  atomic.Int64
}

// New returns a budget of limit bytes; limit <= 0 means DefaultLimit.
func New(limit int64) *Budget {
	if limit <= 0 {
		limit = DefaultLimit
	}
	return &Budget{limit: limit}
}

// Limit is the budget's size in bytes.
func (b *Budget) Limit() int64 {
	if b == nil {
		return DefaultLimit
	}
	return b.limit
}

// Used is the number of bytes currently reserved.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Reserve takes n bytes from the budget for what ("node \"mm\" (MatMul):
// float32 (65536, 65536)"), or returns an *ExceededError and takes nothing.
// Negative n is an error: it comes from overflowed arithmetic.
func (b *Budget) Reserve(n int64, what string) error {
	if n < 0 {
		return &ExceededError{What: what, Bytes: n, Limit: b.Limit()}
	}
	if b == nil {
		if n > DefaultLimit {
			return &ExceededError{What: what, Bytes: n, Limit: DefaultLimit}
		}
		return nil
	}
	for {
		used := b.used.Load()
		if n > b.limit-used {
			return &ExceededError{What: what, Bytes: n, Used: used, Limit: b.limit}
		}
		if b.used.CompareAndSwap(used, used+n) {
			return nil
		}
	}
}

// Release returns n bytes taken by Reserve.
func (b *Budget) Release(n int64) {
	if b != nil && n > 0 {
		b.used.Add(-n)
	}
}

// ExceededError is a reservation the budget refused.
type ExceededError struct {
	// What asked for the memory: a node, a layer, a file, with its shape.
	What string
	// Bytes is the size asked for; negative when the size overflowed.
	Bytes int64
	// Used is what was already reserved; Limit the budget's size.
	Used, Limit int64
}

// Error says what asked for how much, and the budget it exceeded.
func (e *ExceededError) Error() string {
	need := Format(e.Bytes)
	if e.Bytes < 0 {
		need = "more bytes than int64 can count"
	}
	if e.Used > 0 {
		return fmt.Sprintf("%s needs %s, over the memory budget of %s (%s already in use)",
			e.What, need, Format(e.Limit), Format(e.Used))
	}
	return fmt.Sprintf("%s needs %s, over the memory budget of %s", e.What, need, Format(e.Limit))
}

// Is makes errors.Is(err, ErrExceeded) true.
func (e *ExceededError) Is(target error) bool { return target == ErrExceeded }

// Bytes returns elems*elemSize, or -1 when the product overflows int64,
// which Reserve then refuses.
func Bytes(elems int64, elemSize int) int64 {
	if elems < 0 || elemSize < 0 {
		return -1
	}
	if elemSize > 0 && elems > math.MaxInt64/int64(elemSize) {
		return -1
	}
	return elems * int64(elemSize)
}

// Elements returns the product of dims, or -1 when a dim is negative or the
// product overflows int64.
func Elements(dims []int) int64 {
	n := int64(1)
	for _, d := range dims {
		if d < 0 {
			return -1
		}
		if d == 0 {
			return 0
		}
	}
	for _, d := range dims {
		if n > math.MaxInt64/int64(d) {
			return -1
		}
		n *= int64(d)
	}
	return n
}

// units are the suffixes Parse accepts, largest first within each system.
var units = []struct {
	suffix string
	scale  float64
}{
	{"TIB", 1 << 40}, {"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3},
	{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10},
	{"B", 1},
}

// Parse reads a size such as "1GiB", "512MiB", "1.5G" or "1000000": binary
// units (KiB, MiB, GiB, TiB, and the bare K, M, G, T), decimal units (KB,
// MB, GB, TB) or plain bytes, case-insensitively.
func Parse(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	scale := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, scale = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.scale
			break
		}
	}
	x, err := strconv.ParseFloat(t, 64)
	if err != nil || x <= 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return 0, fmt.Errorf("size %q: want a positive number of bytes with an optional unit, such as 512MiB or 2GiB", s)
	}
	n := x * scale
	if n >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q does not fit in int64 bytes", s)
	}
	return int64(n), nil
}

// Format writes a byte count for people: "512 B", "1.5 KiB", "16 GiB".
func Format(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	x, i := float64(n), 0
	for x >= unit && i < 4 {
		x /= unit
		i++
	}
	num := strings.TrimSuffix(strconv.FormatFloat(x, 'f', 1, 64), ".0")
	return num + " " + []string{"", "KiB", "MiB", "GiB", "TiB"}[i]
}
