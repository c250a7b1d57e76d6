package lift

import (
	"fmt"
	"strings"
)

// origin is where a block of a parameter's rows comes from: rows lo:hi of
// an initializer, transposed or not.
type origin struct {
	init       string // "" when no initializer holds the numbers
	transposed bool
	lo, hi     int // rows of the (transposed) initializer
	rows       int // how many rows it has
	// none records a block no graph value holds (an identity the lift
	// supplies for a projection the graph does not have).
	none bool
	// view, when set, is the 2-D shape the initializer of another rank was
	// read as (Keras's (d, heads, head_dim) Einsum weights): (rows, cols).
	view []int
}

// mapping describes a parameter's rows for the mapping table: one row per
// initializer block, adjacent blocks of one initializer merged, so that a
// packed in_proj_weight read back whole maps as it is.
func (a *analysis) mapping(name string, p param) []Mapping {
	var blocks []origin
	for _, pc := range p.pieces {
		o := a.origin(pc, p.value.Dims())
		if n := len(blocks); n > 0 && o.init != "" && blocks[n-1].init == o.init &&
			blocks[n-1].transposed == o.transposed && blocks[n-1].hi == o.lo {
			blocks[n-1].hi = o.hi
			continue
		}
		blocks = append(blocks, o)
	}
	var out []Mapping
	at := 0
	for _, o := range blocks {
		n := o.hi - o.lo
		var parts []string
		switch {
		case o.init == "" && o.none:
			parts = append(parts, "in no graph tensor: set by the lift (see the notes)")
		case o.init == "":
			parts = append(parts, "computed by the graph")
		}
		if o.view != nil {
			parts = append(parts, fmt.Sprintf("reshaped %s to %s", fmtShape(dimsOf(a.g.Inits[o.init].GetDims())), fmtShape(o.view)))
		}
		if o.transposed {
			parts = append(parts, "transposed")
		}
		if o.init != "" && (o.lo != 0 || o.hi != o.rows) {
			what := "split rows"
			if p.value.Dims() == 1 {
				what = "split"
			}
			parts = append(parts, fmt.Sprintf("%s %d:%d", what, o.lo, o.hi))
		}
		if len(blocks) > 1 {
			parts = append(parts, fmt.Sprintf("into rows %d:%d", at, at+n))
		}
		at += n
		out = append(out, Mapping{Initializer: o.init, Param: name, Transform: strings.Join(parts, ", ")})
	}
	return out
}

// origin finds the initializer a parameter piece comes from. A piece read
// from an initializer (or a plain copy of one) is described by the lift
// itself: a MatMul weight transposed, rows split off a packed projection.
// A piece the graph computes (PyTorch's dynamic exports slice
// in_proj_weight and transpose it with nodes) is traced back to its
// initializer through those nodes, and described the same way.
func (a *analysis) origin(pc piece, dims int) origin {
	rowsOf := func(init string, transposed bool) int {
		d := a.g.Inits[init].GetDims()
		if transposed && len(d) == 2 {
			return int(d[1])
		}
		return int(d[0])
	}
	if init := a.g.Origin(pc.value); init != "" && a.g.Inits[init] != nil {
		o := origin{init: init, transposed: pc.transposed, rows: rowsOf(init, pc.transposed)}
		o.lo, o.hi = 0, o.rows
		if pc.split {
			o.lo, o.hi = pc.lo, pc.hi
		}
		return o
	}
	for _, init := range a.g.StaticSources(pc.value) {
		t := a.g.Inits[init]
		if t == nil {
			continue
		}
		for _, view := range views(dimsOf(t.GetDims()), dims) {
			if o, ok := a.derive(init, pc, dims, view); ok {
				o.rows = view[0]
				if o.transposed && len(view) == 2 {
					o.rows = view[1]
				}
				if len(t.GetDims()) != dims {
					o.view = view
				}
				return o
			}
		}
	}
	n := pc.hi - pc.lo
	return origin{lo: 0, hi: n, none: pc.value == ""}
}

// derive traces a piece to an initializer it is a layout of: the rows of
// the initializer, or of its transpose, that the piece holds.
func (a *analysis) derive(init string, pc piece, dims int, src []int) (origin, bool) {
	p := a.probes[0]
	shape, idx, err := p.trace(init, pc.value, nil, nil)
	if err != nil || len(shape) != dims || dims < 1 || dims > 2 {
		return origin{}, false
	}
	if pc.transposed && dims == 2 { // the parameter is the value's transpose
		r, c := shape[0], shape[1]
		t := make([]int, len(idx))
		for i := 0; i < r; i++ {
			for j := 0; j < c; j++ {
				t[j*r+i] = idx[i*c+j]
			}
		}
		idx, shape = t, []int{c, r}
	}
	cols := 1
	if dims == 2 {
		cols = shape[1]
	}
	if pc.split {
		idx = idx[pc.lo*cols : pc.hi*cols]
	}
	R, C := src[0], 1
	if dims == 2 {
		C = src[1]
	}
	n := len(idx) / cols
	if lo, ok := firstRow(idx, cols, func(r, c int) int { return r*C + c }, C == cols); ok {
		return origin{init: init, lo: lo, hi: lo + n}, true
	}
	if dims == 2 && cols == R {
		if lo, ok := firstRow(idx, cols, func(r, c int) int { return c*C + r }, true); ok {
			return origin{init: init, transposed: true, lo: lo, hi: lo + n}, true
		}
	}
	return origin{}, false
}

// firstRow checks that idx holds consecutive rows of a matrix whose element
// (r, c) is at at(r, c), and returns the first of them.
func firstRow(idx []int, cols int, at func(r, c int) int, fits bool) (int, bool) {
	if !fits || len(idx) == 0 {
		return 0, false
	}
	first := -1
	for lo := 0; lo*cols <= idx[0] && first < 0; lo++ {
		if at(lo, 0) == idx[0] {
			first = lo
		}
	}
	if first < 0 {
		return 0, false
	}
	for k, f := range idx {
		if at(first+k/cols, k%cols) != f {
			return 0, false
		}
	}
	return first, true
}

// views lists the shapes of rank dims an initializer of shape shape may be
// read as: itself; for a matrix read from a tensor of higher rank, its
// first axis by the others and its last axis after the others; for a
// vector, all of it.
func views(shape []int, dims int) [][]int {
	switch {
	case len(shape) == dims:
		return [][]int{shape}
	case dims == 2 && len(shape) > 2:
		first, last := 1, 1
		for _, d := range shape[1:] {
			first *= d
		}
		for _, d := range shape[:len(shape)-1] {
			last *= d
		}
		return [][]int{{shape[0], first}, {last, shape[len(shape)-1]}}
	case dims == 1 && len(shape) > 1:
		n := 1
		for _, d := range shape {
			n *= d
		}
		return [][]int{{n}}
	}
	return nil
}

// dimsOf converts a tensor's dims to ints.
func dimsOf(d []int64) []int {
	out := make([]int, len(d))
	for i, x := range d {
		out[i] = int(x)
	}
	return out
}
