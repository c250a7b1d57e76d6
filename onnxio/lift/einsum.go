package lift

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	ir "github.com/attnrun/attnrun/onnxio/graph"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Einsum as matrix products. Keras and tf2onnx write attention with
// Einsum: projections "abc,cde->abde" into heads by a (d, heads,
// head_dim) kernel, the scores "aecd,abcd->acbe", the weighted values
// "acbe,aecd->abcd", the output projection "abcd,cde->abe". The lifter
// reads such a graph as the same computation spelled with Transpose,
// Reshape and MatMul (the Add of a projection's bias folded before the
// head split), which its recognizers know; the lifted model is still
// checked against the graph as written.

// einsumRewrite is one Einsum read as a matrix product.
type einsumRewrite struct {
	x, y      string // the operands: x computed or first, y the other
	tx, ty    string // their terms
	out       string // the output term
	batch     []rune // letters of both operands and the output
	contract  []rune // letters of both operands only
	fx, fy    []rune // letters of one operand and the output
	sizes     map[rune]int64
	staticY   bool
	yInit     *onnxpb.TensorProto
	biasInit  *onnxpb.TensorProto // the folded bias, or nil
	biasAdd   *onnxpb.NodeProto
	finalName string
}

// readEinsums rewrites the graph's two-operand Einsum nodes that are
// matrix products as MatMul with Transposes and Reshapes. It returns m
// itself when there are none, and otherwise a new model sharing m's
// tensors, with a note.
func readEinsums(m *onnxpb.ModelProto) (*onnxpb.ModelProto, []string) {
	gp := m.GetGraph()
	if gp == nil {
		return m, nil
	}
	inits := map[string]*onnxpb.TensorProto{}
	for _, t := range gp.GetInitializer() {
		inits[t.GetName()] = t
	}
	readers := map[string][]*onnxpb.NodeProto{}
	for _, n := range gp.GetNode() {
		for _, in := range n.GetInput() {
			readers[in] = append(readers[in], n)
		}
	}
	outputs := map[string]bool{}
	for _, o := range gp.GetOutput() {
		outputs[o.GetName()] = true
	}
	var nodes []*onnxpb.NodeProto
	var added []*onnxpb.TensorProto
	skip := map[*onnxpb.NodeProto]bool{}
	count := 0
	for _, n := range gp.GetNode() {
		if skip[n] {
			continue
		}
		r, ok := planEinsum(n, inits, readers, outputs)
		if !ok {
			nodes = append(nodes, n)
			continue
		}
		if r.biasAdd != nil {
			skip[r.biasAdd] = true
		}
		ns, ts := r.nodes(n.GetOutput()[0], cmp.Or(n.GetName(), n.GetOutput()[0]))
		nodes = append(nodes, ns...)
		added = append(added, ts...)
		count++
	}
	if count == 0 {
		return m, nil
	}
	return ir.WithNodes(m, nodes, added), []string{fmt.Sprintf("%d Einsum node(s) were read as MatMul with Transpose and Reshape", count)}
}

// planEinsum decides whether Einsum node n is a matrix product the rewrite
// spells: two operands, no repeated or summed-out letters, one contracted
// and one free letter of the second operand unless that operand is an
// initializer (whose sizes let several be merged), one free letter of
// the first when the second has batch letters.
func planEinsum(n *onnxpb.NodeProto, inits map[string]*onnxpb.TensorProto, readers map[string][]*onnxpb.NodeProto, outputs map[string]bool) (*einsumRewrite, bool) {
	if n.GetOpType() != "Einsum" || (n.GetDomain() != "" && n.GetDomain() != "ai.onnx") || len(n.GetInput()) != 2 || len(n.GetOutput()) != 1 {
		return nil, false
	}
	var eq string
	for _, a := range n.GetAttribute() {
		if a.GetName() == "equation" {
			eq = strings.ReplaceAll(string(a.GetS()), " ", "")
		}
	}
	lhs, out, ok := strings.Cut(eq, "->")
	if !ok {
		return nil, false
	}
	t1, t2, ok := strings.Cut(lhs, ",")
	if !ok || !distinctLetters(t1) || !distinctLetters(t2) || !distinctLetters(out) {
		return nil, false
	}
	r := &einsumRewrite{x: n.GetInput()[0], y: n.GetInput()[1], tx: t1, ty: t2, out: out, sizes: map[rune]int64{}}
	if _, ok := inits[r.x]; ok {
		r.x, r.y, r.tx, r.ty = r.y, r.x, r.ty, r.tx
	}
	if _, ok := inits[r.x]; ok {
		return nil, false // two constants: nothing to lift
	}
	if _, ok := inits[r.y]; !ok && freeOrder(r.ty, r.tx, out) { // two computed operands: the product's rows come from the one whose letters lead the output
		r.x, r.y, r.tx, r.ty = r.y, r.x, r.ty, r.tx
	}
	for _, c := range r.tx {
		inY, inOut := strings.ContainsRune(r.ty, c), strings.ContainsRune(out, c)
		switch {
		case inY && inOut:
			r.batch = append(r.batch, c)
		case inY:
			r.contract = append(r.contract, c)
		case inOut:
			r.fx = append(r.fx, c)
		default:
			return nil, false // summed out of one operand
		}
	}
	for _, c := range r.ty {
		switch inX, inOut := strings.ContainsRune(r.tx, c), strings.ContainsRune(out, c); {
		case !inX && inOut:
			r.fy = append(r.fy, c)
		case !inX:
			return nil, false
		}
	}
	for _, c := range out {
		if !strings.ContainsRune(r.tx, c) && !strings.ContainsRune(r.ty, c) {
			return nil, false
		}
	}
	if len(r.contract) == 0 || len(r.fy) == 0 || len(r.fx) == 0 {
		return nil, false
	}
	if t, ok := inits[r.y]; ok && len(t.GetDims()) == len(r.ty) {
		r.staticY, r.yInit = true, t
		for i, c := range r.ty {
			r.sizes[c] = t.GetDims()[i]
		}
	}
	if !r.staticY && (len(r.contract) != 1 || len(r.fy) != 1) || len(r.batch) > 0 && len(r.fx) != 1 {
		return nil, false
	}
	r.finalName = n.GetOutput()[0]
	if r.staticY && len(r.batch) == 0 && out == string(r.fx)+string(r.fy) && !outputs[r.finalName] && len(readers[r.finalName]) == 1 {
		if add := readers[r.finalName][0]; add.GetOpType() == "Add" && len(add.GetInput()) == 2 {
			other := add.GetInput()[0]
			if other == r.finalName {
				other = add.GetInput()[1]
			}
			if b, ok := inits[other]; ok && other != r.finalName && slices.Equal(b.GetDims(), r.fySizes()) {
				r.biasInit, r.biasAdd, r.finalName = b, add, add.GetOutput()[0]
			}
		}
	}
	return r, true
}

// freeOrder reports whether the first free letter of a (one not in b)
// comes before that of b in the output term.
func freeOrder(a, b, out string) bool {
	first := func(t, other string) int {
		for i, c := range out {
			if strings.ContainsRune(t, c) && !strings.ContainsRune(other, c) {
				return i
			}
		}
		return len(out)
	}
	return first(a, b) < first(b, a)
}

// distinctLetters reports whether a term is lowercase letters, each once.
func distinctLetters(term string) bool {
	for i, c := range term {
		if c < 'a' || c > 'z' || strings.ContainsRune(term[i+1:], c) {
			return false
		}
	}
	return term != ""
}

// fySizes are the sizes of the second operand's free letters.
func (r *einsumRewrite) fySizes() []int64 {
	var s []int64
	for _, c := range r.fy {
		s = append(s, r.sizes[c])
	}
	return s
}

// nodes spells the rewrite: the operands transposed to (batch, free,
// contracted) and (batch, contracted, free), merged where the second is a
// constant, multiplied, the bias added, and the result split and
// transposed to the output term. Values are named after the Einsum's
// output, nodes after the Einsum (label).
func (r *einsumRewrite) nodes(base, label string) ([]*onnxpb.NodeProto, []*onnxpb.TensorProto) {
	var ns []*onnxpb.NodeProto
	var ts []*onnxpb.TensorProto
	k := 0
	fresh := func(what string) string { k++; return fmt.Sprintf("%s/einsum_%s_%d", base, what, k) }
	shapeConst := func(dims []int64) string {
		name := fresh("shape")
		ts = append(ts, &onnxpb.TensorProto{Name: proto.String(name), Dims: []int64{int64(len(dims))},
			DataType: proto.Int32(7), Int64Data: dims})
		return name
	}
	transpose := func(v, term string, order []rune) string {
		perm := make([]int64, len(order))
		for i, c := range order {
			perm[i] = int64(strings.IndexRune(term, c))
		}
		if slices.IsSorted(perm) {
			return v
		}
		o := fresh("transpose")
		ns = append(ns, &onnxpb.NodeProto{OpType: proto.String("Transpose"), Input: []string{v}, Output: []string{o},
			Attribute: []*onnxpb.AttributeProto{{Name: proto.String("perm"), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: perm}}})
		return o
	}
	reshape := func(v string, dims []int64, out string) string {
		if out == "" {
			out = fresh("reshape")
		}
		ns = append(ns, &onnxpb.NodeProto{OpType: proto.String("Reshape"), Input: []string{v, shapeConst(dims)}, Output: []string{out}})
		return out
	}
	lead := len(r.batch) + len(r.fx)
	x := transpose(r.x, r.tx, concatRunes(r.batch, r.fx, r.contract))
	y := transpose(r.y, r.ty, concatRunes(r.batch, r.contract, r.fy))
	if r.staticY {
		if len(r.contract) > 1 {
			x = reshape(x, append(make([]int64, lead), -1), "")
		}
		var dims []int64
		for _, c := range r.batch {
			dims = append(dims, r.sizes[c])
		}
		dims = append(dims, product64(r.sizes, r.contract), product64(r.sizes, r.fy))
		y = reshape(y, dims, "")
	}
	prod := fresh("matmul")
	ns = append(ns, &onnxpb.NodeProto{OpType: proto.String("MatMul"), Input: []string{x, y}, Output: []string{prod}})
	if r.biasInit != nil {
		bias := reshape(r.biasInit.GetName(), []int64{product64(r.sizes, r.fy)}, "")
		sum := fresh("add")
		ns = append(ns, &onnxpb.NodeProto{OpType: proto.String("Add"), Input: []string{prod, bias}, Output: []string{sum}})
		prod = sum
	}
	have := concatRunes(r.batch, r.fx, r.fy)
	final := string(have) == r.out
	if r.staticY && len(r.fy) > 1 {
		target := ""
		if final {
			target = r.finalName
		}
		prod = reshape(prod, append(make([]int64, lead), r.fySizes()...), target)
	}
	if string(have) != r.out {
		perm := make([]int64, len(r.out))
		for i, c := range r.out {
			perm[i] = int64(slices.Index(have, c))
		}
		ns = append(ns, &onnxpb.NodeProto{OpType: proto.String("Transpose"), Input: []string{prod}, Output: []string{r.finalName},
			Attribute: []*onnxpb.AttributeProto{{Name: proto.String("perm"), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: perm}}})
	} else if prod != r.finalName {
		ns[len(ns)-1].Output[0] = r.finalName
	}
	for i, n := range ns {
		n.Name = proto.String(fmt.Sprintf("%s/%s_%d", label, strings.ToLower(n.GetOpType()), i))
	}
	return ns, ts
}

// concatRunes joins letter lists.
func concatRunes(parts ...[]rune) []rune {
	var out []rune
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// product64 multiplies the sizes of some letters.
func product64(sizes map[rune]int64, letters []rune) int64 {
	p := int64(1)
	for _, c := range letters {
		p *= sizes[c]
	}
	return p
}
