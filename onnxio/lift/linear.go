package lift

import (
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/match"
)

// linear is an nn.Linear found in the graph, y = x Wᵀ + b, however the
// exporter wrote it: MatMul by a static (in, out) matrix with an optional
// Add of a static bias, or Gemm with transB.
type linear struct {
	in, out string  // data input and output values
	nodes   []*node // MatMul [+ Add], or Gemm
	// weight is (out, in), as nn.Linear stores it; bias is (out) or nil.
	weight, bias *tensor.Dense
	// weightValue and biasValue name the graph values they are read from.
	weightValue, biasValue string
	// transposed records that the graph holds the weight as (in, out).
	transposed bool
	// matrix records a bare parameter used as x @ W (SelfAttention_v1): an
	// (in, out) initializer that kept its parameter name instead of being
	// renamed to onnx::MatMul_NN, the name PyTorch gives the transposed copy
	// of an nn.Linear weight. Only the parameter layout depends on it.
	matrix    bool
	dIn, dOut int
}

// matchLinear recognizes the Linear whose output is v, or returns nil.
func (a *analysis) matchLinear(v string) *linear {
	n := a.g.Producer(v)
	if n == nil {
		return nil
	}
	switch n.GetOpType() {
	case "Add":
		var l *linear
		match.BiasAdd[*node, string](analysisView{a}, n, func(mm *node, k int) bool {
			l = a.biasedLinear(mm, n.GetInput()[k])
			return l != nil
		})
		if l == nil {
			l = a.tensordotLinear(n)
		}
		if l != nil {
			l.nodes = append(l.nodes, n)
			l.out = v
		}
		return l
	case "MatMul":
		return a.matchMatMul(n)
	case "Gemm":
		return a.matchGemm(n)
	}
	return nil
}

// analysisView is the graph as package match's matchers see it for the
// lifter: NodeProtos and value names; a value is private when it is
// computed from the inputs, read (for its contents) by one node only and
// no graph output.
type analysisView struct{ a *analysis }

// Producer returns the node computing v.
func (v analysisView) Producer(x string) (*node, bool) {
	n := v.a.g.Producer(x)
	return n, n != nil
}

// Op is n's op type.
func (analysisView) Op(n *node) string { return n.GetOpType() }

// Inputs are n's inputs.
func (analysisView) Inputs(n *node) []string { return n.GetInput() }

// Private reports whether x is computed from the inputs, read by one node
// and no graph output.
func (v analysisView) Private(x string) bool {
	g := v.a.g
	return g.IsData(x) && len(g.DataConsumers(x)) == 1 && !g.IsOutput(x)
}

// biasedLinear is the Linear of MatMul mm with a static bias: nil unless
// mm multiplies by a static matrix and bias is a static vector of its
// output width.
func (a *analysis) biasedLinear(mm *node, bias string) *linear {
	if !a.g.Static(bias) {
		return nil
	}
	l := a.matchMatMul(mm)
	if l == nil {
		return nil
	}
	b, err := a.probes[0].value(bias)
	if err != nil || b.Shape().TotalSize() != l.dOut || !biasShape(b.Shape(), l.dOut) {
		return nil
	}
	l.bias, l.biasValue = toFloat32(b, l.dOut), bias
	return l
}

// public is the Linear as patterns see it.
func (l *linear) public() *match.Linear {
	nodes := make([]*match.Node, len(l.nodes))
	for i, n := range l.nodes {
		nodes[i] = match.NewNode(n)
	}
	return &match.Linear{Input: l.in, Output: l.out, In: l.dIn, Out: l.dOut, Weight: l.weight, Bias: l.bias,
		WeightFrom: l.weightValue, BiasFrom: l.biasValue, Transposed: l.transposed, Nodes: nodes}
}

// biasShape accepts (out), (1, out), (1, 1, out): a bias added to every row.
func biasShape(s tensor.Shape, out int) bool {
	if s.IsScalar() || s[len(s)-1] != out {
		return false
	}
	for _, d := range s[:len(s)-1] {
		if d != 1 {
			return false
		}
	}
	return true
}

// matchMatMul recognizes MatMul(x, W) with W a static (in, out) matrix.
func (a *analysis) matchMatMul(n *node) *linear {
	g, p := a.g, a.probes[0]
	if n == nil || n.GetOpType() != "MatMul" {
		return nil
	}
	x, w := n.GetInput()[0], n.GetInput()[1]
	if !g.IsData(x) || !g.Static(w) {
		return nil
	}
	wt, err := p.value(w)
	if err != nil || wt.Dims() != 2 || wt.Dtype() != tensor.Float32 {
		return nil
	}
	in, out := wt.Shape()[0], wt.Shape()[1]
	from := g.Origin(w)
	return &linear{
		in: x, out: n.GetOutput()[0], nodes: []*node{n},
		weight: transpose2(wt), weightValue: w, transposed: true,
		matrix: from != "" && !strings.HasPrefix(from, "onnx::") && !strings.HasPrefix(from, "(") && !strings.HasSuffix(from, "weight"),
		dIn:    in, dOut: out,
	}
}

// matchGemm recognizes Gemm(x, W, b) computing x Wᵀ + b (transB=1) or
// x W + b (transB=0), with alpha and beta 1.
func (a *analysis) matchGemm(n *node) *linear {
	g, p := a.g, a.probes[0]
	ins := n.GetInput()
	if !g.IsData(ins[0]) || !g.Static(ins[1]) || n.Int("transA", 0) != 0 ||
		n.Float("alpha", 1) != 1 || n.Float("beta", 1) != 1 {
		return nil
	}
	wt, err := p.value(ins[1])
	if err != nil || wt.Dims() != 2 || wt.Dtype() != tensor.Float32 {
		return nil
	}
	l := &linear{in: ins[0], out: n.GetOutput()[0], nodes: []*node{n}, weightValue: ins[1]}
	if n.Int("transB", 0) == 1 {
		l.weight = wt
		l.dOut, l.dIn = wt.Shape()[0], wt.Shape()[1]
	} else {
		l.weight, l.transposed = transpose2(wt), true
		l.dIn, l.dOut = wt.Shape()[0], wt.Shape()[1]
	}
	if len(ins) > 2 && ins[2] != "" {
		if !g.Static(ins[2]) {
			return nil
		}
		b, err := p.value(ins[2])
		if err != nil || !biasShape(b.Shape(), l.dOut) {
			return nil
		}
		l.bias, l.biasValue = toFloat32(b, l.dOut), ins[2]
	}
	return l
}

// transpose2 returns the transpose of a float32 matrix as a new tensor.
func transpose2(t *tensor.Dense) *tensor.Dense {
	r, c := t.Shape()[0], t.Shape()[1]
	src := t.Data().([]float32)
	dst := make([]float32, r*c)
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			dst[j*r+i] = src[i*c+j]
		}
	}
	return tensor.New(tensor.WithShape(c, r), tensor.WithBacking(dst))
}

// toFloat32 copies a float tensor into a new float32 tensor of shape
// (n) (a bias) or keeps its shape when n is 0.
func toFloat32(t *tensor.Dense, n int) *tensor.Dense {
	f, _ := match.Floats(t)
	out := make([]float32, len(f))
	for i, v := range f {
		out[i] = float32(v)
	}
	shape := []int(t.Shape().Clone())
	if n > 0 {
		shape = []int{n}
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(out))
}

// weightPiece is where rows lo:hi of the weight (out, in) come from;
// whole says they are all of it.
func (l *linear) weightPiece(lo, hi int, whole bool) piece {
	return piece{value: l.weightValue, transposed: l.transposed, lo: lo, hi: hi, split: !whole}
}

// biasPiece is where elements lo:hi of the bias come from.
func (l *linear) biasPiece(lo, hi int, whole bool) piece {
	return piece{value: l.biasValue, lo: lo, hi: hi, split: !whole}
}

// params lists the whole Linear as nn.Linear's weight and bias, named
// with the given prefix ("out_proj.").
func (l *linear) params(prefix string) []param {
	ps := []param{{name: prefix + "weight", value: l.weight, pieces: []piece{l.weightPiece(0, l.dOut, true)}}}
	if l.bias != nil {
		ps = append(ps, param{name: prefix + "bias", value: l.bias, pieces: []piece{l.biasPiece(0, l.dOut, true)}})
	}
	return ps
}

// tensordotLinear recognizes TensorFlow's Dense as keras2onnx writes it
// (Tensordot): the tokens flattened to (B·T, d_in), MatMul by a static
// matrix, the rows Reshaped back to (B, T, d_out), then the bias Added.
// The Reshape between the product and the Add only regroups rows, so the
// Linear reads row r of its input into row r of its output as any does.
// It returns the Linear of the MatMul, biased, with the Reshape among its
// nodes; the caller adds the Add.
func (a *analysis) tensordotLinear(add *node) *linear {
	for k, in := range add.GetInput() {
		rs := a.g.Producer(in)
		if rs == nil || rs.GetOpType() != "Reshape" || !(analysisView{a}).Private(in) {
			continue
		}
		mm := a.g.Producer(rs.GetInput()[0])
		if mm == nil || mm.GetOpType() != "MatMul" || !(analysisView{a}).Private(rs.GetInput()[0]) || !a.keepsRows(rs) {
			continue
		}
		if l := a.biasedLinear(mm, add.GetInput()[1-k]); l != nil {
			l.nodes = append(l.nodes, rs)
			if flat := a.g.Producer(l.in); flat != nil && flat.GetOpType() == "Reshape" && (analysisView{a}).Private(l.in) &&
				a.keepsRows(flat) && a.sameRows(flat.GetInput()[0], rs.GetOutput()[0]) {
				l.in = flat.GetInput()[0] // the tokens before they were flattened: the Linear reads them as they are
				l.nodes = append([]*node{flat}, l.nodes...)
			}
			return l
		}
	}
	return nil
}

// keepsRows reports whether a Reshape keeps its input's last axis, at
// every probe: it only regroups the rows.
func (a *analysis) keepsRows(rs *node) bool {
	for _, p := range a.probes {
		si, err1 := p.shape(rs.GetInput()[0])
		so, err2 := p.shape(rs.GetOutput()[0])
		if err1 != nil || err2 != nil || len(si) == 0 || len(so) == 0 || si[len(si)-1] != so[len(so)-1] {
			return false
		}
	}
	return true
}

// sameRows reports whether two values have the same shape but for their
// last axis, at every probe.
func (a *analysis) sameRows(x, y string) bool {
	for _, p := range a.probes {
		sx, err1 := p.shape(x)
		sy, err2 := p.shape(y)
		if err1 != nil || err2 != nil || len(sx) == 0 || !slices.Equal(sx[:len(sx)-1], sy[:len(sy)-1]) {
			return false
		}
	}
	return true
}
