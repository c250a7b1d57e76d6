package exec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// prepareNodes resolves every node's op, attributes and value slots. It
// reports all problems at once, and the supported ops once at the end when
// some op is not among them.
func (b *builder) prepareNodes(nps []*onnxpb.NodeProto) ([]*node, error) {
	var errs []error
	var unsupported []string
	nodes := make([]*node, 0, len(nps))
	for i, np := range nps {
		n, err := b.prepareNode(i, np)
		var u unsupportedOpError
		switch {
		case errors.As(err, &u):
			unsupported = append(unsupported, u.Error())
		case err != nil:
			errs = append(errs, err)
		default:
			nodes = append(nodes, n)
		}
	}
	if len(unsupported) > 0 {
		errs = append(errs, fmt.Errorf("%s; supported: %s", strings.Join(unsupported, "; "), strings.Join(SupportedOps(), ", ")))
	}
	return nodes, errors.Join(errs...)
}

// unsupportedOpError is a node whose op the executor does not implement.
type unsupportedOpError struct {
	label, op string
	opset     int
}

// Error says which node and op, in the form New reports.
func (e unsupportedOpError) Error() string {
	return fmt.Sprintf("node %s: op %q (opset %d) is not supported", e.label, e.op, e.opset)
}

// prepareNode resolves one node; see prepareNodes.
func (b *builder) prepareNode(i int, np *onnxpb.NodeProto) (*node, error) {
	n := &node{index: i, name: np.GetName(), op: np.GetOpType()}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("node %s: op %q "+format, append([]any{n.label(), n.op}, args...)...)
	}
	opset, err := b.nodeOpset(np)
	if err != nil {
		return nil, fail("%w", err)
	}
	n.op, n.opset = opKey(np.GetDomain(), np.GetOpType()), opset
	spec, ok := ops[n.op]
	if !ok {
		return nil, unsupportedOpError{n.label(), n.op, n.opset}
	}
	if n.opset < spec.since {
		if spec.runtimeSince == 0 || n.opset < spec.runtimeSince {
			return nil, fail("(opset %d) is not supported: it is implemented from opset %d on", n.opset, spec.since)
		}
		b.warn("node %s: op %q at opset %d runs with its opset-%d semantics, as ONNX Runtime does (ONNX standardized it at opset %d)",
			n.label(), n.op, n.opset, spec.since, spec.since)
	}
	if v, ok := unimplementedRevisions[n.op]; ok && n.opset >= v {
		return nil, fail("(opset %d) is not supported: its version %d is not implemented (up to opset %d)", n.opset, v, v-1)
	}
	if v, ok := unimplementedRevisions[n.op]; ok && n.opset >= v {
		return nil, fail("(opset %d) is not supported: its version %d is not implemented (up to opset %d)", n.opset, v, v-1)
	}
	n.spec = spec
	ins, outs := np.GetInput(), np.GetOutput()
	if len(ins) < spec.minIn || spec.maxIn >= 0 && len(ins) > spec.maxIn {
		return nil, fail("takes %s inputs, the node has %d", arity(spec.minIn, spec.maxIn), len(ins))
	}
	if len(outs) < spec.minOut || spec.maxOut >= 0 && len(outs) > spec.maxOut {
		return nil, fail("has %s outputs, the node has %d", arity(spec.minOut, spec.maxOut), len(outs))
	}
	attrs, unknown, err := decodeAttributes(np.GetAttribute(), spec, n.opset, b.budget)
	if err != nil {
		return nil, fail("%w", err)
	}
	for _, name := range unknown {
		b.warn("node %s: op %q has unknown attribute %q, ignored as ONNX Runtime ignores it", n.label(), n.op, name)
	}
	n.attrs = attrs
	for k, name := range ins {
		switch {
		case name != "":
			n.in = append(n.in, b.ref(name))
		// Variadic inputs are never optional (Concat, Max), but in ops that
		// require none (Loop, Scan), whose leading inputs may be left empty.
		case k < spec.minIn || spec.maxIn < 0 && spec.minIn > 0:
			return nil, fail("needs input %d, which is empty", k)
		default:
			n.in = append(n.in, -1)
		}
		n.inName = append(n.inName, name)
	}
	if err := b.prepareSubgraphs(n, np.GetAttribute()); err != nil {
		return nil, fail("%w", err)
	}
	for _, name := range outs {
		if name == "" {
			n.out = append(n.out, -1)
			continue
		}
		s := b.slot(name)
		if b.known[s] {
			return nil, fail("writes %q, which is already a graph input or initializer", name)
		}
		if p := b.producer[s]; p >= 0 {
			b.renameOutput(b.prepared[p], s)
			b.warn("node %s: op %q writes %q, which node %s (%s) wrote before; the later producer wins, as in ONNX Runtime",
				n.label(), n.op, name, b.prepared[p].label(), b.prepared[p].op)
		}
		b.producer[s] = i
		n.out = append(n.out, s)
	}
	if spec.check != nil {
		if err := spec.check(n); err != nil {
			return nil, fail("%w", err)
		}
	}
	b.prepared[i] = n
	return n, nil
}

// renameOutput moves node n's output at slot s to a fresh slot that no
// name refers to, so that a later producer of the same name takes its
// readers.
func (b *builder) renameOutput(n *node, s int) {
	fresh := len(b.g.consts)
	b.g.consts = append(b.g.consts, nil)
	b.producer = append(b.producer, n.index)
	b.known = append(b.known, false)
	for k, o := range n.out {
		if o == s {
			n.out[k] = fresh
		}
	}
}

// arity formats an input or output count range: "2", "1 to 3", "at least 1".
func arity(lo, hi int) string {
	switch {
	case hi < 0:
		return "at least " + strconv.Itoa(lo)
	case lo == hi:
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// decodeAttributes converts a node's attributes, checking each against the
// op's schema; tensors take their memory from b. Attributes the schema does
// not name are returned in unknown rather than refused: ONNX Runtime ignores
// them, and real files carry misspelled ones ("epsion").
func decodeAttributes(aps []*onnxpb.AttributeProto, spec *opSpec, opset int, b *budget.Budget) (attrs map[string]attribute, unknown []string, err error) {
	attrs = make(map[string]attribute, len(aps))
	for _, ap := range aps {
		name := ap.GetName()
		want, ok := spec.attrs[name]
		if !ok {
			unknown = append(unknown, name)
			continue
		}
		if v, moved := spec.movedToInput[name]; moved && opset >= v {
			return nil, nil, fmt.Errorf("has attribute %q, which is an input from opset %d on", name, v)
		}
		if ap.GetRefAttrName() != "" {
			return nil, nil, fmt.Errorf("attribute %q refers to a function attribute, which is not supported", name)
		}
		kind := attrKind(ap.GetType())
		if kind == 0 {
			kind = inferKind(ap)
		}
		if kind != want {
			return nil, nil, fmt.Errorf("attribute %q must be %s, is %s", name, want, kind)
		}
		a := attribute{kind: kind, f: ap.GetF(), i: ap.GetI(), s: string(ap.GetS()), floats: ap.GetFloats(), ints: ap.GetInts()}
		if kind == attrTensor {
			v, err := loadTensor(ap.GetT(), b)
			if err != nil {
				return nil, nil, fmt.Errorf("attribute %q: %w", name, err)
			}
			a.t = v
		}
		if _, dup := attrs[name]; dup {
			return nil, nil, fmt.Errorf("has attribute %q twice", name)
		}
		attrs[name] = a
	}
	return attrs, unknown, nil
}

// inferKind guesses the kind of an attribute written without its type
// field (very old exporters) from the field that is set.
func inferKind(ap *onnxpb.AttributeProto) attrKind {
	switch {
	case ap.F != nil:
		return attrFloat
	case ap.I != nil:
		return attrInt
	case ap.S != nil:
		return attrString
	case ap.T != nil:
		return attrTensor
	case ap.G != nil:
		return attrGraph
	case len(ap.Floats) > 0:
		return attrFloats
	case len(ap.Ints) > 0:
		return attrInts
	case len(ap.Strings) > 0:
		return attrStrings
	}
	return 0
}
