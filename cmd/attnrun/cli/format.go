package cli

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/tensorfmt"
)

// formatTensor prints float32 values of the given shape the way PyTorch
// prints a tensor; see formatArray.
func formatTensor(data []float32, shape []int) string {
	if shape == nil {
		shape = []int{}
	}
	return formatArray(array.FromSlice(shape, data))
}

// formatFloat32 prints a float32 tensor with elements exactly as PyTorch
// does (wrapping at 80 columns, summarizing above 1000 elements):
// internal/tensorfmt holds the rules and their test against PyTorch's own
// printouts.
func formatFloat32(a *array.Array) string {
	return tensorfmt.Float32(a.Data.([]float32), a.Shape)
}

// formatArray prints an array the way PyTorch prints the same tensor, so
// that output can be compared with a notebook by eye:
//
//	tensor([[0.4421, 0.5931],
//	        [0.4419, 0.6515]])
//
// Like PyTorch it uses "2." for all-integer floats, four decimals
// otherwise, and scientific notation when magnitudes span more than 1000x
// or leave [1e-4, 1e8); integers print as integers and bools as
// True/False, all right-aligned to one width. A tensor of zero elements
// prints as tensor([]) with its size unless it is (0,). The dtype follows
// as PyTorch adds it: for every type but float32, int64 and bool (and for
// every empty tensor but float32), "dtype=torch.int32"; types PyTorch lacks
// (int4, float4e2m1, ...) show their ONNX name.
func formatArray(a *array.Array) string {
	if a.DType == array.Float32 && a.Len() > 0 {
		return formatFloat32(a)
	}
	var suffixes []string
	if a.Len() == 0 && len(a.Shape) != 1 {
		suffixes = append(suffixes, "size="+array.FormatShape(a.Shape))
	}
	if a.DType != array.Float32 && (a.Len() == 0 || a.DType != array.Int64 && a.DType != array.Bool) {
		suffixes = append(suffixes, "dtype="+torchName(a.DType))
	}
	var b strings.Builder
	b.WriteString("tensor(")
	switch {
	case a.Len() == 0:
		b.WriteString("[]")
	case len(a.Shape) == 0:
		b.WriteString(strings.TrimSpace(formatCells(a)[0]))
	default:
		writeNested(&b, formatCells(a), a.Shape, len("tensor("), 0)
	}
	for _, s := range suffixes {
		b.WriteString(", " + s)
	}
	b.WriteString(")")
	return b.String()
}

// torchNames are PyTorch's names of the types it has under another name
// than "torch." + the ONNX name.
var torchNames = map[array.DType]string{
	array.Float8E8M0: "torch.float8_e8m0fnu", array.Float8E4M3FN: "torch.float8_e4m3fn",
	array.Float8E4M3FNUZ: "torch.float8_e4m3fnuz", array.Float8E5M2: "torch.float8_e5m2",
	array.Float8E5M2FNUZ: "torch.float8_e5m2fnuz",
}

// torchName is the name PyTorch prints for dt ("torch.int32"), or the
// ONNX name for a type PyTorch has not.
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

// formatCells formats every element of a, right-aligned to one width.
func formatCells(a *array.Array) []string {
	v := reflect.ValueOf(a.Data)
	cells := make([]string, v.Len())
	switch data := a.Data.(type) {
	case []bool:
		for i, x := range data {
			cells[i] = "False"
			if x {
				cells[i] = "True"
			}
		}
	case []float32, []float64:
		floats := make([]float64, v.Len())
		for i := range floats {
			floats[i] = v.Index(i).Float()
		}
		format := chooseFormat(floats)
		for i, x := range floats {
			cells[i] = format(x)
		}
	default: // integers
		for i := range cells {
			if x := v.Index(i); x.CanInt() {
				cells[i] = strconv.FormatInt(x.Int(), 10)
			} else {
				cells[i] = strconv.FormatUint(x.Uint(), 10)
			}
		}
	}
	width := 0
	for _, c := range cells {
		width = max(width, len(c))
	}
	for i, c := range cells {
		cells[i] = strings.Repeat(" ", width-len(c)) + c
	}
	return cells
}

// writeNested writes one bracketed level; indent is the column of the
// outermost bracket, as PyTorch aligns nested rows under it.
func writeNested(b *strings.Builder, cells []string, shape []int, indent, depth int) {
	b.WriteString("[")
	if len(shape) == 1 {
		b.WriteString(strings.Join(cells, ", "))
		b.WriteString("]")
		return
	}
	stride := len(cells) / max(shape[0], 1)
	for i := 0; i < shape[0]; i++ {
		if i > 0 {
			b.WriteString(",")
			b.WriteString(strings.Repeat("\n", len(shape)-1))
			b.WriteString(strings.Repeat(" ", indent+depth+1))
		}
		writeNested(b, cells[i*stride:(i+1)*stride], shape[1:], indent, depth+1)
	}
	b.WriteString("]")
}

// chooseFormat picks PyTorch's format for a tensor of floating-point
// values.
func chooseFormat(data []float64) func(float64) string {
	allInts := true
	minAbs, maxAbs := math.Inf(1), 0.0
	for _, f := range data {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		if f != math.Trunc(f) {
			allInts = false
		}
		a := math.Abs(f)
		if a != 0 {
			minAbs = math.Min(minAbs, a)
		}
		maxAbs = math.Max(maxAbs, a)
	}
	special := func(v float64) (string, bool) {
		switch {
		case math.IsNaN(v):
			return "nan", true
		case math.IsInf(v, 1):
			return "inf", true
		case math.IsInf(v, -1):
			return "-inf", true
		}
		return "", false
	}
	if allInts && maxAbs < 1e8 {
		return func(v float64) string {
			if s, ok := special(v); ok {
				return s
			}
			return fmt.Sprintf("%.0f.", v)
		}
	}
	sci := maxAbs >= 1e8 || (minAbs != math.Inf(1) && (minAbs < 1e-4 || maxAbs/minAbs > 1000))
	return func(v float64) string {
		if s, ok := special(v); ok {
			return s
		}
		if sci {
			return fmt.Sprintf("%.4e", v)
		}
		return fmt.Sprintf("%.4f", v)
	}
}
