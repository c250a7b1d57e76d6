package cli

import (
	"fmt"
	"math"
	"strings"
)

// formatTensor prints values of the given shape the way PyTorch prints a
// tensor, so that output can be compared with a notebook by eye:
// tensor([[0.4421, 0.5931],
//
//	[0.4419, 0.6515]])
//
// Like PyTorch it uses "2." for all-integer tensors, four decimals otherwise,
// and scientific notation when magnitudes span more than 1000x or leave
// [1e-4, 1e8).
func formatTensor(data []float32, shape []int) string {
	format := chooseFormat(data)
	width := 0
	cells := make([]string, len(data))
	for i, v := range data {
		cells[i] = format(v)
		width = max(width, len(cells[i]))
	}
	for i, c := range cells {
		cells[i] = strings.Repeat(" ", width-len(c)) + c
	}
	var b strings.Builder
	b.WriteString("tensor(")
	if len(shape) == 0 {
		if len(cells) > 0 {
			b.WriteString(strings.TrimSpace(cells[0]))
		}
		b.WriteString(")")
		return b.String()
	}
	writeNested(&b, cells, shape, len("tensor("), 0)
	b.WriteString(")")
	return b.String()
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

func chooseFormat(data []float32) func(float32) string {
	allInts := true
	minAbs, maxAbs := math.Inf(1), 0.0
	for _, v := range data {
		f := float64(v)
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
	special := func(v float32) (string, bool) {
		switch {
		case math.IsNaN(float64(v)):
			return "nan", true
		case math.IsInf(float64(v), 1):
			return "inf", true
		case math.IsInf(float64(v), -1):
			return "-inf", true
		}
		return "", false
	}
	if allInts && maxAbs < 1e8 {
		return func(v float32) string {
			if s, ok := special(v); ok {
				return s
			}
			return fmt.Sprintf("%.0f.", v)
		}
	}
	sci := maxAbs >= 1e8 || (minAbs != math.Inf(1) && (minAbs < 1e-4 || maxAbs/minAbs > 1000))
	return func(v float32) string {
		if s, ok := special(v); ok {
			return s
		}
		if sci {
			return fmt.Sprintf("%.4e", v)
		}
		return fmt.Sprintf("%.4f", v)
	}
}
