package exec

import (
	"fmt"
	"math"
	"strings"

	"github.com/attnrun/attnrun/array"
)

// maxEmptyExtent bounds the product of the nonzero dimensions of an empty
// tensor. Memory bounds every other shape (the budget, or the value a view
// reads), but an empty tensor takes none, and ops still walk its outer
// axes: a (0, 2^40) tensor would keep a loop busy for hours and make index
// arithmetic overflow. 2^32 is far beyond any real use of an empty tensor.
const maxEmptyExtent = 1 << 32

// maxDimension bounds a single dimension or pad computed from data (a
// OneHot depth, a Pad width) before the shape it makes is checked: far
// beyond any real use, and small enough that sums of a few never overflow.
const maxDimension = 1 << 40

// numel is the number of elements of an array of the given shape.
func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// checkExtent checks a shape computed from data before anything is made
// of it: no dimension is negative, and an empty shape's other dimensions
// multiply to at most maxEmptyExtent. The budget bounds the size of
// non-empty shapes when they are allocated.
func checkExtent(shape []int) error {
	extent, empty := 1, false
	for _, d := range shape {
		switch {
		case d < 0:
			return fmt.Errorf("negative dimension in shape %s", shapeString(shape))
		case d == 0:
			empty = true
		case extent <= maxEmptyExtent:
			extent = min(mulSat(extent, d), maxEmptyExtent+1)
		}
	}
	if empty && extent > maxEmptyExtent {
		return fmt.Errorf("shape %s is empty, but its other dimensions multiply to more than %d", shapeString(shape), maxEmptyExtent)
	}
	return nil
}

// mulSat returns a·b for a, b >= 0, or math.MaxInt when the product
// overflows.
func mulSat(a, b int) int {
	if a != 0 && b > math.MaxInt/a {
		return math.MaxInt
	}
	return a * b
}

// addDims returns a+b for dimensions a, b >= 0, or an error when the sum
// overflows.
func addDims(a, b int) (int, error) {
	if b > math.MaxInt-a {
		return 0, fmt.Errorf("dimensions %d and %d add up to more than %d", a, b, math.MaxInt)
	}
	return a + b, nil
}

// stridesOf returns the row-major strides of a contiguous array.
func stridesOf(shape []int) []int {
	s := make([]int, len(shape))
	step := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = step
		step *= shape[i]
	}
	return s
}

// shapeString formats a shape the way errors show it, as every part of
// attnrun does (array.FormatShape): "(2, 3)", "(3,)", "()" for a scalar.
func shapeString(shape []int) string { return array.FormatShape(shape) }

// broadcastShapes returns the numpy broadcast of the given shapes: aligned
// on the right, each dimension is either equal or 1.
func broadcastShapes(shapes ...[]int) ([]int, error) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make([]int, rank)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		for i, d := range s {
			o := &out[rank-len(s)+i]
			switch {
			case d == *o || d == 1:
			case *o == 1:
				*o = d
			default:
				return nil, fmt.Errorf("shapes %s do not broadcast", joinShapes(shapes))
			}
		}
	}
	return out, nil
}

// joinShapes formats several shapes: "(2, 3) and (4)".
func joinShapes(shapes [][]int) string {
	parts := make([]string, len(shapes))
	for i, s := range shapes {
		parts[i] = shapeString(s)
	}
	if len(parts) <= 2 {
		return strings.Join(parts, " and ")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// broadcastStrides returns the strides with which a contiguous array of
// shape s is read when broadcast to out: right-aligned, 0 along the
// dimensions of size 1 (broadcast, or of no consequence) and along the
// leading dimensions s lacks.
func broadcastStrides(s, out []int) []int {
	st := make([]int, len(out))
	own := stridesOf(s)
	off := len(out) - len(s)
	for i, d := range s {
		if d != 1 {
			st[off+i] = own[i]
		}
	}
	return st
}

// normalizeAxis maps an axis in [-rank, rank) to [0, rank).
func normalizeAxis(axis, rank int) (int, error) {
	if axis < -rank || axis >= rank {
		return 0, fmt.Errorf("axis %d is out of range for rank %d", axis, rank)
	}
	if axis < 0 {
		axis += rank
	}
	return axis, nil
}

// normalizeAxes normalizes a list of axes and rejects repeats.
func normalizeAxes(axes []int64, rank int) ([]int, error) {
	out := make([]int, len(axes))
	seen := make([]bool, rank)
	for i, a := range axes {
		ax, err := normalizeAxis(int(a), rank)
		if err != nil {
			return nil, err
		}
		if seen[ax] {
			return nil, fmt.Errorf("axis %d appears twice in %v", a, axes)
		}
		seen[ax] = true
		out[i] = ax
	}
	return out, nil
}

// walk visits every element of an array of the given shape in row-major
// order, one innermost run at a time. Each operand k reads the array
// through its own strides[k]; for every run, visit receives each operand's
// offset of the run's first element, the run length n, and each operand's
// step along the run. Dimensions that are contiguous for every operand are
// merged first, so runs are as long as the layouts allow.
func walk(shape []int, strides [][]int, visit func(off []int, n int, step []int)) {
	if numel(shape) == 0 {
		return
	}
	dims, st := coalesce(shape, strides)
	ops := len(strides)
	last := len(dims) - 1
	buf := make([]int, 2*ops+max(last, 0)) // one allocation: a decoding step walks hundreds of times
	off, step, idx := buf[:ops:ops], buf[ops:2*ops:2*ops], buf[2*ops:]
	if last < 0 { // a scalar: one run of one element
		visit(off, 1, step)
		return
	}
	for k := range ops {
		step[k] = st[k][last]
	}
	n := dims[last]
	for {
		visit(off, n, step)
		// Advance the odometer over the outer dimensions.
		d := last - 1
		for ; d >= 0; d-- {
			idx[d]++
			for k := range ops {
				off[k] += st[k][d]
			}
			if idx[d] < dims[d] {
				break
			}
			for k := range ops {
				off[k] -= st[k][d] * dims[d]
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// coalesce drops dimensions of size 1 and merges neighbouring dimensions
// that every operand reads contiguously (stride[i] == stride[i+1]·dim[i+1]).
func coalesce(shape []int, strides [][]int) ([]int, [][]int) {
	r := len(shape)
	back := make([]int, (len(strides)+1)*r) // dims, then each operand's strides: appends stay inside
	dims := back[:0:r]
	st := make([][]int, len(strides))
	for k := range st {
		st[k] = back[(k+1)*r : (k+1)*r : (k+2)*r]
	}
	for i, d := range shape {
		if d == 1 {
			continue
		}
		if j := len(dims) - 1; j >= 0 && mergeable(st, strides, j, i, d) {
			dims[j] *= d
			for k := range strides {
				st[k][j] = strides[k][i]
			}
			continue
		}
		dims = append(dims, d)
		for k := range strides {
			st[k] = append(st[k], strides[k][i])
		}
	}
	return dims, st
}

// mergeable reports whether the kept dimension j can absorb dimension i of
// size d for every operand.
func mergeable(st, strides [][]int, j, i, d int) bool {
	for k := range strides {
		if st[k][j] != strides[k][i]*d {
			return false
		}
	}
	return true
}

// equalShapes reports whether two shapes are identical.
func equalShapes(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
