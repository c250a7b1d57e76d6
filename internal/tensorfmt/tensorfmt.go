// Package tensorfmt prints tensors as PyTorch's print(tensor) does with its
// default print options, so that a result can be held against a notebook's
// output by eye, character for character.
//
// The rules are torch/_tensor_str.py's: floats get four decimals, or "2."
// when every finite value is integral, or scientific notation when the
// nonzero finite magnitudes span more than 1000× or leave [1e-4, 1e8); all
// elements share one width, computed from the nonzero finite ones; rows
// wrap at 80 columns; a tensor of more than 1000 elements is summarized
// with the first and last 3 entries of every axis around "..."; dtypes
// other than float32, int64 and bool are named in a suffix (every dtype but
// float32 for a tensor of zero elements).
//
// Array prints every element type of package array, the CLI's values;
// Dense prints the *tensor.Dense of the public API through it.
package tensorfmt

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
)

// PyTorch's default print options.
const (
	precision = 4    // decimals
	threshold = 1000 // elements above which a tensor is summarized
	edgeItems = 3    // entries kept at each end of a summarized axis
	lineWidth = 80   // columns before a row wraps
)

// prefix opens every tensor's text; nested rows align under its bracket.
const prefix = "tensor("

// Array formats a as PyTorch prints a tensor of the same dtype and
// values: every numeric dtype and bool, zero elements included. A dtype
// PyTorch has no name for (int4, float4e2m1, ...) is named as ONNX names it.
func Array(a *array.Array) string {
	if a == nil {
		return "<nil tensor>"
	}
	if err := a.Check(); err != nil {
		return "<" + err.Error() + ">"
	}
	return format(a.Shape, a.Len(), cellsOf(a.Data), a.DType)
}

// Dense formats a tensor as Array does; a dtype an Array cannot hold
// prints as "<dtype tensor of shape (…)>".
func Dense(t *tensor.Dense) string {
	if t == nil {
		return "<nil tensor>"
	}
	a, err := array.FromDense(t)
	if err != nil {
		return fmt.Sprintf("<%v tensor of shape %s>", t.Dtype(), array.FormatShape(t.Shape()))
	}
	return Array(a)
}

// cellsOf wraps an Array's data, one of array's storage slices.
func cellsOf(data any) cells {
	switch d := data.(type) {
	case []float32:
		values := make([]float64, len(d))
		for i, v := range d {
			values[i] = float64(v)
		}
		return &floats{values: values}
	case []float64:
		return &floats{values: d}
	case []bool:
		return &plain{text: func(i int) string { return pythonBool[d[i]] }}
	}
	v := reflect.ValueOf(data) // an integer type
	return &plain{text: func(i int) string {
		x := v.Index(i)
		if x.CanInt() {
			return strconv.FormatInt(x.Int(), 10)
		}
		return strconv.FormatUint(x.Uint(), 10)
	}}
}

// cells knows how to write each element of a tensor, given the elements
// a printout shows (all, or the edges of a summarized tensor): PyTorch
// chooses the notation and the width from those alone.
type cells interface {
	// layout fixes the notation and the common width from the shown
	// elements, by flat index.
	layout(shown []int)
	// cell writes element i, padded on the left to the common width.
	cell(i int) string
	// width is the common width.
	width() int
}

// format writes the tensor's text: the nested rows and the suffixes.
func format(shape []int, n int, c cells, dt array.DType) string {
	var suffixes []string
	if n == 0 {
		if len(shape) != 1 {
			suffixes = append(suffixes, "size="+array.FormatShape(shape))
		}
		if dt != array.Float32 { // nothing to tell an int64 tensor by
			suffixes = append(suffixes, "dtype="+torchName(dt))
		}
		return addSuffixes(prefix+"[]", suffixes)
	}
	if dt != array.Float32 && dt != array.Int64 && dt != array.Bool {
		suffixes = append(suffixes, "dtype="+torchName(dt))
	}
	p := printer{shape: shape, summarize: n > threshold, cells: c}
	c.layout(p.shown(0, 0))
	var b strings.Builder
	b.WriteString(prefix)
	if len(shape) == 0 {
		b.WriteString(c.cell(0))
	} else {
		p.write(&b, 0, 0, len(prefix))
	}
	return addSuffixes(b.String(), suffixes)
}

// torchNames are PyTorch's names of the types it calls otherwise than
// "torch." and the ONNX name.
var torchNames = map[array.DType]string{
	array.Float8E8M0: "torch.float8_e8m0fnu", array.Float8E4M3FN: "torch.float8_e4m3fn",
	array.Float8E4M3FNUZ: "torch.float8_e4m3fnuz", array.Float8E5M2: "torch.float8_e5m2",
	array.Float8E5M2FNUZ: "torch.float8_e5m2fnuz",
}

// torchName is the name PyTorch prints for dt ("torch.int32"), or the
// ONNX name of a type PyTorch has not.
func torchName(dt array.DType) string {
	if name, ok := torchNames[dt]; ok {
		return name
	}
	switch dt {
	case array.Int4, array.Uint4, array.Int2, array.Uint2, array.Float4E2M1:
		return dt.String()
	}
	return "torch." + dt.String()
}

// addSuffixes closes the text as _add_suffixes does: each suffix after a
// comma, on a new line indented under the bracket when the line would pass
// 80 columns. PyTorch's line length counts 2 more than the last line's
// characters; the rule keeps that count.
func addSuffixes(text string, suffixes []string) string {
	var b strings.Builder
	b.WriteString(text)
	last := len(text) - strings.LastIndexByte(text, '\n') + 1
	for _, s := range suffixes {
		if last+len(s)+2 > lineWidth {
			b.WriteString(",\n" + strings.Repeat(" ", len(prefix)) + s)
			last = len(prefix) + len(s)
		} else {
			b.WriteString(", " + s)
			last += len(s) + 2
		}
	}
	b.WriteString(")")
	return b.String()
}

// printer walks a tensor's axes.
type printer struct {
	shape     []int
	summarize bool
	cells     cells
}

// indices lists the entries of an axis of the given size that a printout
// shows, and where "..." goes (-1 for nowhere): all of them, or the first
// and last edgeItems of an axis too long for a summary.
func (p *printer) indices(size int) (idx []int, gap int) {
	if !p.summarize || size <= 2*edgeItems {
		idx = make([]int, size)
		for i := range idx {
			idx[i] = i
		}
		return idx, -1
	}
	idx = make([]int, 0, 2*edgeItems)
	for i := range edgeItems {
		idx = append(idx, i)
	}
	for i := size - edgeItems; i < size; i++ {
		idx = append(idx, i)
	}
	return idx, edgeItems
}

// stride is the number of elements one step along axis spans.
func (p *printer) stride(axis int) int {
	s := 1
	for _, d := range p.shape[axis+1:] {
		s *= d
	}
	return s
}

// shown lists the flat indices of the elements shown from axis on, for
// the sub-tensor starting at offset.
func (p *printer) shown(axis, offset int) []int {
	if len(p.shape) == 0 {
		return []int{0}
	}
	idx, _ := p.indices(p.shape[axis])
	stride := p.stride(axis)
	var out []int
	for _, i := range idx {
		if axis == len(p.shape)-1 {
			out = append(out, offset+i)
		} else {
			out = append(out, p.shown(axis+1, offset+i*stride)...)
		}
	}
	return out
}

// write writes the sub-tensor at offset from axis on, its opening bracket
// at column indent.
func (p *printer) write(b *strings.Builder, axis, offset, indent int) {
	idx, gap := p.indices(p.shape[axis])
	stride := p.stride(axis)
	b.WriteString("[")
	if axis == len(p.shape)-1 {
		p.writeRow(b, idx, gap, offset, indent)
		b.WriteString("]")
		return
	}
	sep := "," + strings.Repeat("\n", len(p.shape)-axis-1) + strings.Repeat(" ", indent+1)
	for k, i := range idx {
		if k > 0 {
			b.WriteString(sep)
		}
		if k == gap {
			b.WriteString("..." + sep)
		}
		p.write(b, axis+1, offset+i*stride, indent+1)
	}
	b.WriteString("]")
}

// writeRow writes the elements of a last axis, as many per line as fit in
// 80 columns after the indent, with " ..." standing for the ones left out.
func (p *printer) writeRow(b *strings.Builder, idx []int, gap, offset, indent int) {
	items := make([]string, 0, len(idx)+1)
	for k, i := range idx {
		if k == gap {
			items = append(items, " ...")
		}
		items = append(items, p.cells.cell(offset+i))
	}
	perLine := max(1, (lineWidth-indent)/(p.cells.width()+2))
	for k, item := range items {
		switch {
		case k == 0:
		case k%perLine == 0:
			b.WriteString(",\n" + strings.Repeat(" ", indent+1))
		default:
			b.WriteString(", ")
		}
		b.WriteString(item)
	}
}

// pad right-aligns s in width columns, never cutting it.
func pad(s string, width int) string {
	if len(s) >= width {
		return s
	}
	return strings.Repeat(" ", width-len(s)) + s
}

// floatMode is how a floating tensor writes its numbers.
type floatMode int

const (
	fixed      floatMode = iota // 0.1234
	integral                    // 2.
	scientific                  // 1.2340e-05
)

// floats writes floating values in the notation _Formatter picks.
type floats struct {
	values []float64
	mode   floatMode
	w      int
}

func (c *floats) layout(shown []int) {
	c.mode, c.w = integral, 1
	minAbs, maxAbs := math.Inf(1), 0.0
	seen := false
	for _, i := range shown {
		v := c.values[i]
		if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		seen = true
		if v != math.Ceil(v) {
			c.mode = fixed
		}
		minAbs, maxAbs = math.Min(minAbs, math.Abs(v)), math.Max(maxAbs, math.Abs(v))
	}
	if !seen {
		return // nothing finite and nonzero: "0." and "nan" as they come
	}
	wide := maxAbs/minAbs > 1000 || maxAbs > 1e8
	if wide || (c.mode == fixed && minAbs < 1e-4) {
		c.mode = scientific
	}
	for _, i := range shown {
		v := c.values[i]
		if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		c.w = max(c.w, len(c.text(v)))
	}
}

// text writes one value without padding.
func (c *floats) text(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	switch c.mode {
	case scientific:
		return strconv.FormatFloat(v, 'e', precision, 64)
	case integral:
		return strconv.FormatFloat(v, 'f', 0, 64) + "."
	}
	return strconv.FormatFloat(v, 'f', precision, 64)
}

func (c *floats) cell(i int) string { return pad(c.text(c.values[i]), c.w) }
func (c *floats) width() int        { return c.w }

// pythonBool is how Python writes a bool.
var pythonBool = map[bool]string{true: "True", false: "False"}

// plain writes integers and bools as Python's str does, all to one
// width.
type plain struct {
	text func(i int) string
	w    int
}

func (c *plain) layout(shown []int) {
	c.w = 1
	for _, i := range shown {
		c.w = max(c.w, len(c.text(i)))
	}
}

func (c *plain) cell(i int) string { return pad(c.text(i), c.w) }
func (c *plain) width() int        { return c.w }
