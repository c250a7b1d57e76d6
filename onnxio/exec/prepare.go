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
	n := &node{index: i, name: np.GetName(), op: np.GetOpType(), opset: b.g.opset}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("node %s: op %q "+format, append([]any{n.label(), n.op}, args...)...)
	}
	if d := np.GetDomain(); d != "" && d != "ai.onnx" {
		return nil, fail("is in domain %q; only the default ONNX domain (ai.onnx) is supported", d)
	}
	spec, ok := ops[n.op]
	if !ok {
		return nil, unsupportedOpError{n.label(), n.op, n.opset}
	}
	if n.opset < spec.since {
		return nil, fail("(opset %d) is not supported: it is implemented from opset %d on", n.opset, spec.since)
	}
	n.spec = spec
	ins, outs := np.GetInput(), np.GetOutput()
	if len(ins) < spec.minIn || spec.maxIn >= 0 && len(ins) > spec.maxIn {
		return nil, fail("takes %s inputs, the node has %d", arity(spec.minIn, spec.maxIn), len(ins))
	}
	if len(outs) < spec.minOut || spec.maxOut >= 0 && len(outs) > spec.maxOut {
		return nil, fail("has %s outputs, the node has %d", arity(spec.minOut, spec.maxOut), len(outs))
	}
	attrs, err := decodeAttributes(np.GetAttribute(), spec, n.opset, b.budget)
	if err != nil {
		return nil, fail("%w", err)
	}
	n.attrs = attrs
	for k, name := range ins {
		switch {
		case name != "":
			n.in = append(n.in, b.slot(name))
		case k < spec.minIn || spec.maxIn < 0: // variadic inputs (Concat, Max) are never optional
			return nil, fail("needs input %d, which is empty", k)
		default:
			n.in = append(n.in, -1)
		}
		n.inName = append(n.inName, name)
	}
	for _, name := range outs {
		if name == "" {
			n.out = append(n.out, -1)
			continue
		}
		s := b.slot(name)
		if b.known[s] || b.producer[s] >= 0 {
			return nil, fail("writes %q, which is already an input, initializer or another node's output", name)
		}
		b.producer[s] = i
		n.out = append(n.out, s)
	}
	return n, nil
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
// op's schema; tensors take their memory from b.
func decodeAttributes(aps []*onnxpb.AttributeProto, spec *opSpec, opset int, b *budget.Budget) (map[string]attribute, error) {
	attrs := make(map[string]attribute, len(aps))
	for _, ap := range aps {
		name := ap.GetName()
		want, ok := spec.attrs[name]
		if !ok {
			return nil, fmt.Errorf("has unknown attribute %q", name)
		}
		if v, moved := spec.movedToInput[name]; moved && opset >= v {
			return nil, fmt.Errorf("has attribute %q, which is an input from opset %d on", name, v)
		}
		if ap.GetRefAttrName() != "" {
			return nil, fmt.Errorf("attribute %q refers to a function attribute, which is not supported", name)
		}
		kind := attrKind(ap.GetType())
		if kind == 0 {
			kind = inferKind(ap)
		}
		if kind != want {
			return nil, fmt.Errorf("attribute %q must be %s, is %s", name, want, kind)
		}
		a := attribute{kind: kind, f: ap.GetF(), i: ap.GetI(), s: string(ap.GetS()), floats: ap.GetFloats(), ints: ap.GetInts()}
		if kind == attrTensor {
			v, err := loadTensor(ap.GetT(), b)
			if err != nil {
				return nil, fmt.Errorf("attribute %q: %w", name, err)
			}
			a.t = v
		}
		if _, dup := attrs[name]; dup {
			return nil, fmt.Errorf("has attribute %q twice", name)
		}
		attrs[name] = a
	}
	return attrs, nil
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
	case len(ap.Floats) > 0:
		return attrFloats
	case len(ap.Ints) > 0:
		return attrInts
	case len(ap.Strings) > 0:
		return attrStrings
	}
	return 0
}
