package exec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/attnrun/attnrun/internal/kernels"
)

func init() {
	ops["Einsum"] = &opSpec{since: 12, minIn: 1, maxIn: -1, minOut: 1, maxOut: 1, run: einsumOp,
		attrs: map[string]attrKind{"equation": attrString}}
}

// einsumOp is the kernel of Einsum, numpy's einsum: "ij,jk->ik" names
// each operand's axes by letters; letters repeated within an operand take
// a diagonal, letters missing from the output are summed over, and "..."
// stands for broadcast leading axes. Without "->" (implicit mode) the
// output holds the ellipsis axes, then the letters that appear once, in
// alphabetical order.
//
// Every operand is first rearranged to distinct labels (diagonals are
// strided views) with the labels nobody else needs summed out; operands
// are then contracted left to right, each pair as a transpose to
// (batch, free, summed) × (batch, summed, free) and one batched GEMM
// (kernels.GemmStrided for float32).
func einsumOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	if err := sameDType(in); err != nil {
		return nil, err
	}
	if !in[0].dtype.isNumeric() {
		return nil, errDType(in[0], "a numeric type")
	}
	eq, err := parseEinsum(n.attrs["equation"].s, in)
	if err != nil {
		return nil, fmt.Errorf("equation %q: %w", n.attrs["equation"].s, err)
	}
	e := &einsum{rc: rc, n: n, size: eq.size}
	var acc *labeledValue
	for i, v := range in {
		later := slices.Concat(eq.terms[i+1:]...)
		op, err := e.prepare(labeledValue{v, eq.terms[i]}, slices.Concat(later, eq.out, labelsOf(acc)))
		if err != nil {
			return nil, err
		}
		if acc == nil {
			acc = &op
			continue
		}
		next, err := e.contract(*acc, op, slices.Concat(later, eq.out))
		if err != nil {
			return nil, err
		}
		acc = &next
	}
	res, err := e.sumOut(*acc, eq.out)
	if err != nil {
		return nil, err
	}
	return oneOrErr(e.rearrange(res, eq.out))
}

// labeledValue is a tensor whose axes carry labels (small integers: letters and
// the ellipsis axes).
type labeledValue struct {
	v      *value
	labels []int
}

// labelsOf returns an operand's labels, or none for nil.
func labelsOf(op *labeledValue) []int {
	if op == nil {
		return nil
	}
	return op.labels
}

// einsumEq is a parsed equation: each input's labels, the output's, and
// every label's size.
type einsumEq struct {
	terms [][]int
	out   []int
	size  map[int]int
}

// Labels 0..51 are the letters A-Z, a-z (in ASCII order, which is the
// order of implicit outputs, as in numpy); ellipsis axes are 100 + their
// position counted from the right (so that they broadcast right-aligned).
const ellipsisLabel = 100

// parseEinsum parses an equation against the inputs' shapes.
func parseEinsum(equation string, in []*value) (*einsumEq, error) {
	eq := strings.ReplaceAll(equation, " ", "")
	lhs, rhs, explicit := strings.Cut(eq, "->")
	parts := strings.Split(lhs, ",")
	if len(parts) != len(in) {
		return nil, fmt.Errorf("%d operand terms for %d inputs", len(parts), len(in))
	}
	res := &einsumEq{size: map[int]int{}}
	maxEllipsis := 0
	count := map[int]int{}
	for i, p := range parts {
		labels, err := parseTerm(p, in[i].rank())
		if err != nil {
			return nil, fmt.Errorf("operand %d: %w", i, err)
		}
		for a, l := range labels {
			d := in[i].shape[a]
			switch s, ok := res.size[l]; {
			case !ok || s == 1:
				res.size[l] = d
			case d != s && d != 1:
				return nil, fmt.Errorf("label %s has sizes %d and %d", labelName(l), s, d)
			}
			if l >= ellipsisLabel {
				maxEllipsis = max(maxEllipsis, l-ellipsisLabel+1)
			}
			count[l]++
		}
		res.terms = append(res.terms, labels)
	}
	if explicit {
		out, err := parseTerm(rhs, -1)
		if err != nil {
			return nil, fmt.Errorf("output: %w", err)
		}
		for _, l := range out {
			if l < 0 { // the ellipsis placeholder
				continue
			}
			if count[l] == 0 {
				return nil, fmt.Errorf("output label %s appears in no operand", labelName(l))
			}
		}
		if len(uniq(out)) != len(out) {
			return nil, fmt.Errorf("output repeats a label")
		}
		res.out = expandEllipsis(out, maxEllipsis)
		return res, nil
	}
	for l := maxEllipsis - 1; l >= 0; l-- {
		res.out = append(res.out, ellipsisLabel+l)
	}
	once := func(yield func(int) bool) { // a repeat within one term ("ii") counts twice
		for l, c := range count {
			if l < ellipsisLabel && c == 1 && !yield(l) {
				return
			}
		}
	}
	res.out = append(res.out, slices.Sorted(once)...)
	return res, nil
}

// parseTerm turns one term into labels. With rank >= 0 the ellipsis
// stands for the axes the letters leave over; with rank -1 (the output)
// it becomes a placeholder (-1) that expandEllipsis replaces.
func parseTerm(term string, rank int) ([]int, error) {
	before, after, hasEllipsis := strings.Cut(term, "...")
	var labels []int
	letters := 0
	for _, part := range []string{before, after} {
		for _, c := range part {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
				return nil, fmt.Errorf("invalid character %q", c)
			}
			letters++
		}
	}
	if strings.Contains(after, ".") {
		return nil, fmt.Errorf("more than one ellipsis")
	}
	add := func(part string) {
		for _, c := range part {
			if c <= 'Z' {
				labels = append(labels, int(c-'A'))
			} else {
				labels = append(labels, 26+int(c-'a'))
			}
		}
	}
	add(before)
	if hasEllipsis {
		if rank < 0 {
			labels = append(labels, -1)
		} else {
			k := rank - letters
			if k < 0 {
				return nil, fmt.Errorf("%d letters for rank %d", letters, rank)
			}
			for i := k - 1; i >= 0; i-- {
				labels = append(labels, ellipsisLabel+i)
			}
		}
	} else if rank >= 0 && letters != rank {
		return nil, fmt.Errorf("%d letters for rank %d", letters, rank)
	}
	add(after)
	return labels, nil
}

// expandEllipsis replaces the output's ellipsis placeholder by the
// ellipsis axes (the broadcast of every operand's).
func expandEllipsis(out []int, n int) []int {
	var res []int
	for _, l := range out {
		if l != -1 {
			res = append(res, l)
			continue
		}
		for i := n - 1; i >= 0; i-- {
			res = append(res, ellipsisLabel+i)
		}
	}
	return res
}

// labelName shows a label in errors.
func labelName(l int) string {
	switch {
	case l >= ellipsisLabel:
		return fmt.Sprintf("(ellipsis axis %d from the right)", l-ellipsisLabel)
	case l >= 26:
		return string(rune('a' + l - 26))
	}
	return string(rune('A' + l))
}

// uniq returns the distinct labels in order of first appearance.
func uniq(labels []int) []int {
	var out []int
	for _, l := range labels {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// einsum holds what the steps of one Einsum share.
type einsum struct {
	rc   *runCtx
	n    *node
	size map[int]int
}

// prepare takes an operand's diagonals and sums out the labels that
// neither the other operands nor the output need.
func (e *einsum) prepare(op labeledValue, needed []int) (labeledValue, error) {
	distinct := uniq(op.labels)
	var keep []int
	for _, l := range distinct {
		if slices.Contains(needed, l) {
			keep = append(keep, l)
		}
	}
	v, err := e.rearrange(op, distinct)
	if err != nil {
		return labeledValue{}, err
	}
	return e.sumOut(labeledValue{v, distinct}, keep)
}

// rearrange returns the operand's data with axes in the given label order,
// as a new contiguous value: a repeated label reads the diagonal (its
// axes' strides add up), a size-1 axis broadcasts to the label's size, and
// a label the operand lacks is a broadcast axis.
func (e *einsum) rearrange(op labeledValue, order []int) (*value, error) {
	own := stridesOf(op.v.shape)
	shape := make([]int, len(order))
	strides := make([]int, len(order))
	for i, l := range order {
		shape[i] = e.size[l]
		for a, la := range op.labels {
			if la == l && op.v.shape[a] != 1 {
				strides[i] += own[a]
			}
		}
	}
	if slices.Equal(op.labels, order) && equalShapes(op.v.shape, shape) {
		return op.v, nil
	}
	out, err := e.rc.alloc(e.n, op.v.dtype, shape)
	if err != nil {
		return nil, err
	}
	copyView(out.data, contiguous(shape), op.v.data, view{strides: strides}, shape)
	return out, nil
}

// sumOut sums an operand with distinct labels over every label not in
// keep; the result's labels are the kept ones in the operand's order.
func (e *einsum) sumOut(op labeledValue, keep []int) (labeledValue, error) {
	reduced := make([]bool, len(op.labels))
	var kept []int
	some := false
	for i, l := range op.labels {
		if slices.Contains(keep, l) {
			kept = append(kept, l)
		} else {
			reduced[i], some = true, true
		}
	}
	if !some {
		return op, nil
	}
	x := op.v
	out, err := e.rc.alloc(e.n, x.dtype, droppedShape(x.shape, reduced))
	if err != nil {
		return labeledValue{}, err
	}
	numKindOfData(x.data).sumInto(x, reduced, out.data)
	return labeledValue{out, kept}, nil
}

// sumInto adds the elements of x, of type T, over the marked axes into out.
func (numOf[T]) sumInto(x *value, reduced []bool, out any) {
	xs, o := x.data.([]T), out.([]T)
	eachReduced(x.shape, reduced, func(ix, io int) { o[io] += xs[ix] })
}

// contract multiplies two prepared operands and sums over the labels they
// share that are not needed afterwards.
func (e *einsum) contract(a, b labeledValue, needed []int) (labeledValue, error) {
	var batch, left, right, summed []int
	for _, l := range a.labels {
		switch {
		case !slices.Contains(b.labels, l):
			left = append(left, l)
		case slices.Contains(needed, l):
			batch = append(batch, l)
		default:
			summed = append(summed, l)
		}
	}
	for _, l := range b.labels {
		if !slices.Contains(a.labels, l) {
			right = append(right, l)
		}
	}
	av, err := e.rearrange(a, slices.Concat(batch, left, summed))
	if err != nil {
		return labeledValue{}, err
	}
	bv, err := e.rearrange(b, slices.Concat(batch, summed, right))
	if err != nil {
		return labeledValue{}, err
	}
	g := gemmShape{batch: e.numel(batch), m: e.numel(left), k: e.numel(summed), n: e.numel(right)}
	outLabels := slices.Concat(batch, left, right)
	shape := make([]int, len(outLabels))
	for i, l := range outLabels {
		shape[i] = e.size[l]
	}
	out, err := e.rc.alloc(e.n, av.dtype, shape)
	if err != nil {
		return labeledValue{}, err
	}
	if c, ok := out.data.([]float32); ok {
		kernels.GemmStrided(g.batch, false, false, g.m, g.n, g.k, 1,
			av.data.([]float32), g.k, g.m*g.k, bv.data.([]float32), g.n, g.k*g.n, 0, c, g.n, g.m*g.n)
	} else {
		numKindOfData(out.data).gemm(g, av.data, bv.data, out.data)
	}
	return labeledValue{out, outLabels}, nil
}

// numel is the number of elements the labels span.
func (e *einsum) numel(labels []int) int {
	n := 1
	for _, l := range labels {
		n *= e.size[l]
	}
	return n
}

// gemmShape is a batch of (m, k) × (k, n) products of contiguous
// matrices.
type gemmShape struct{ batch, m, k, n int }

// gemm is the plain loop of the products for type T, used for types
// other than float32 (products wrap in integer types, as numpy's do).
func (numOf[T]) gemm(g gemmShape, ad, bd, cd any) {
	a, b, c := ad.([]T), bd.([]T), cd.([]T)
	for t := range g.batch {
		as, bs, cs := a[t*g.m*g.k:], b[t*g.k*g.n:], c[t*g.m*g.n:]
		for i := range g.m {
			row := cs[i*g.n : (i+1)*g.n]
			for p := range g.k {
				x := as[i*g.k+p]
				for j, y := range bs[p*g.n : (p+1)*g.n] {
					row[j] += x * y
				}
			}
		}
	}
}
