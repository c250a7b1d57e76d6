package exec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Model-local functions (ModelProto.functions) run by inline expansion:
// when New builds a graph, each node whose (domain, op_type, overload)
// names a local function is replaced by the function's body, with the
// formal inputs and outputs bound to the node's values, attribute
// references resolved against the node's attributes and the function's
// defaults, and every value the body defines renamed with a prefix unique
// to the call site. Calls inside the body are expanded in turn, and the
// expanded nodes keep the function's opset imports, so that each runs
// with the semantics of the opset its function was written for.

// maxExpandedNodes bounds the nodes expansion may produce: functions that
// each call the next twice grow exponentially with their depth, and a
// hostile file should get an error, not exhaust memory.
const maxExpandedNodes = 1 << 20

// functionKey identifies a local function as nodes call it.
type functionKey struct{ domain, name, overload string }

// String names a function in errors: "domain.name", with ":overload".
func (k functionKey) String() string {
	s := k.name
	if k.domain != "" {
		s = k.domain + "." + s
	}
	if k.overload != "" {
		s += ":" + k.overload
	}
	return s
}

// keyOf is the key of the function a node would call.
func keyOf(np *onnxpb.NodeProto) functionKey {
	d := np.GetDomain()
	if isDefaultDomain(d) {
		d = ""
	}
	return functionKey{d, np.GetOpType(), np.GetOverload()}
}

// function is one local function, ready to expand.
type function struct {
	key      functionKey
	proto    *onnxpb.FunctionProto
	imports  map[string]int                    // the body's opset imports by domain ("" for the default)
	defaults map[string]*onnxpb.AttributeProto // attributes with a default value (attribute_proto)
	declared map[string]bool                   // every attribute the function declares
}

// functionTable holds a model's local functions for the builders of its
// graph and bodies, and where each node expansion made came from.
type functionTable struct {
	byKey map[functionKey]*function
	// origins gives, for every node expanded from a function body (nested
	// graphs included), the function's opset imports, which nodeOpset
	// resolves its version in, and the calls it is nested in, which
	// expansion checks for recursion.
	origins map[*onnxpb.NodeProto]origin
	calls   int // call sites expanded so far; numbers the value prefixes
	nodes   int // nodes expanded so far, against maxExpandedNodes
}

// origin is where an expanded node came from.
type origin struct {
	imports map[string]int
	stack   []functionKey // the functions it is nested in, outermost first
}

// newFunctionTable indexes the model's local functions; a function
// defined twice is an error. It returns nil when the model has none.
func newFunctionTable(m *onnxpb.ModelProto) (*functionTable, error) {
	if len(m.GetFunctions()) == 0 {
		return nil, nil
	}
	t := &functionTable{byKey: map[functionKey]*function{}, origins: map[*onnxpb.NodeProto]origin{}}
	for _, fp := range m.GetFunctions() {
		f := &function{key: functionKey{fp.GetDomain(), fp.GetName(), fp.GetOverload()}, proto: fp,
			imports: map[string]int{}, defaults: map[string]*onnxpb.AttributeProto{}, declared: map[string]bool{}}
		if isDefaultDomain(f.key.domain) {
			f.key.domain = ""
		}
		if _, dup := t.byKey[f.key]; dup {
			return nil, fmt.Errorf("function %s is defined twice", f.key)
		}
		for _, o := range fp.GetOpsetImport() {
			d := o.GetDomain()
			if isDefaultDomain(d) {
				d = ""
			}
			f.imports[d] = int(o.GetVersion())
		}
		for _, name := range fp.GetAttribute() {
			f.declared[name] = true
		}
		for _, ap := range fp.GetAttributeProto() {
			f.declared[ap.GetName()] = true
			f.defaults[ap.GetName()] = ap
		}
		t.byKey[f.key] = f
	}
	return t, nil
}

// expandCalls returns a graph's nodes with every call of a local function
// replaced by the function's body, recursively. In a body, the values the
// expansion defines are the body's own, not captures of the graph around.
func (b *builder) expandCalls(nps []*onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	if b.funcs == nil {
		return nps, nil
	}
	out, err := b.funcs.expand(nps, b.warn)
	if err != nil {
		return nil, err
	}
	if b.scope != nil {
		for _, np := range out {
			for _, o := range np.GetOutput() {
				if o != "" {
					b.scope.local[o] = true
				}
			}
		}
	}
	return out, nil
}

// expand replaces the calls among nps, and the calls in what they expand
// to; warn reports what it accepts leniently.
func (t *functionTable) expand(nps []*onnxpb.NodeProto, warn func(string, ...any)) ([]*onnxpb.NodeProto, error) {
	var out []*onnxpb.NodeProto
	for i, np := range nps {
		f := t.byKey[keyOf(np)]
		if f == nil {
			out = append(out, np)
			continue
		}
		label := nodeLabel(np, i)
		stack := t.origins[np].stack
		if slices.Contains(stack, f.key) {
			return nil, fmt.Errorf("node %q: function %s calls itself (through %s)", label, f.key, joinKeys(append(stack, f.key)))
		}
		body, err := t.inline(np, label, f, append(slices.Clone(stack), f.key), warn)
		if err != nil {
			return nil, fmt.Errorf("node %q: function %s: %w", label, f.key, err)
		}
		if body, err = t.expand(body, warn); err != nil {
			return nil, err
		}
		out = append(out, body...)
	}
	return out, nil
}

// nodeLabel is a node's name, or its position when it has none.
func nodeLabel(np *onnxpb.NodeProto, i int) string {
	if np.GetName() != "" {
		return np.GetName()
	}
	return fmt.Sprintf("#%d", i)
}

// joinKeys formats a call stack: "a.F > a.G".
func joinKeys(keys []functionKey) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k.String()
	}
	return strings.Join(parts, " > ")
}

// inline returns the body of f as called by node call (named label, nested
// in the calls of stack, f last): fresh nodes, named "label > function >
// node", whose values are renamed and whose attribute references are
// resolved.
func (t *functionTable) inline(call *onnxpb.NodeProto, label string, f *function, stack []functionKey, warn func(string, ...any)) ([]*onnxpb.NodeProto, error) {
	fp := f.proto
	if v, ok := f.imports[""]; ok && (v < 1 || v > maxOpset) {
		return nil, fmt.Errorf("its body imports default-domain opset %d, which the executor does not run (1 to %d)", v, maxOpset)
	}
	if len(call.GetInput()) > len(fp.GetInput()) {
		return nil, fmt.Errorf("the node has %d inputs; the function declares %d", len(call.GetInput()), len(fp.GetInput()))
	}
	if len(call.GetOutput()) > len(fp.GetOutput()) {
		return nil, fmt.Errorf("the node has %d outputs; the function declares %d", len(call.GetOutput()), len(fp.GetOutput()))
	}
	attrs := map[string]*onnxpb.AttributeProto{}
	for _, ap := range call.GetAttribute() {
		if !f.declared[ap.GetName()] {
			warn("node %q: function %s has no attribute %q (it declares %s); ignored, as ONNX Runtime ignores unknown attributes",
				label, f.key, ap.GetName(), quoteAll(slices.Sorted(maps.Keys(f.declared))))
			continue
		}
		attrs[ap.GetName()] = ap
	}
	t.calls++
	names := bindValues(call, fp, fmt.Sprintf("%s#%d/", f.key, t.calls))
	from := origin{imports: f.imports, stack: stack}
	nodes := make([]*onnxpb.NodeProto, 0, len(fp.GetNode())+len(fp.GetOutput()))
	for k, np := range fp.GetNode() {
		inner := nodeLabel(np, k)
		c := &onnxpb.NodeProto{Name: proto.String(label + " > " + f.key.String() + " > " + inner),
			OpType: np.OpType, Domain: np.Domain, Overload: np.Overload, DocString: np.DocString}
		for _, in := range np.GetInput() {
			r, ok := names[in]
			if !ok {
				return nil, fmt.Errorf("node %q reads %q, which is neither an input of the function nor written by its body", inner, in)
			}
			c.Input = append(c.Input, r)
		}
		for _, o := range np.GetOutput() {
			c.Output = append(c.Output, names[o])
		}
		var err error
		if c.Attribute, err = t.bindAttributes(np.GetAttribute(), attrs, f, names); err != nil {
			return nil, fmt.Errorf("node %q: %w", inner, err)
		}
		nodes = append(nodes, t.adopt(c, from))
	}
	// A formal output no body node writes is one of the formal inputs
	// passed through: copy it to the node's output.
	produced := map[string]bool{}
	for _, np := range fp.GetNode() {
		for _, o := range np.GetOutput() {
			produced[o] = true
		}
	}
	for j, o := range fp.GetOutput() {
		if produced[o] {
			continue
		}
		if !slices.Contains(fp.GetInput(), o) {
			return nil, fmt.Errorf("output %q is written by no node of the body, nor an input", o)
		}
		if j < len(call.GetOutput()) && call.GetOutput()[j] != "" {
			nodes = append(nodes, t.adopt(&onnxpb.NodeProto{Name: proto.String(label + " > " + f.key.String() + " > output " + o),
				OpType: proto.String("Identity"), Input: []string{names[o]}, Output: []string{call.GetOutput()[j]}}, from))
		}
	}
	t.nodes += len(nodes)
	if t.nodes > maxExpandedNodes {
		return nil, fmt.Errorf("expanding the model's function calls gives more than %d nodes", maxExpandedNodes)
	}
	return nodes, nil
}

// bindValues maps the names the function's body uses to those of the
// expanded graph: formal inputs to the node's inputs ("" for an omitted
// one), formal outputs written by the body to the node's outputs, and
// every other value the body defines, or an output the node omits, to a
// name under prefix.
func bindValues(call *onnxpb.NodeProto, fp *onnxpb.FunctionProto, prefix string) map[string]string {
	names := map[string]string{}
	for i, in := range fp.GetInput() {
		names[in] = ""
		if i < len(call.GetInput()) {
			names[in] = call.GetInput()[i]
		}
	}
	for _, np := range fp.GetNode() {
		for _, o := range np.GetOutput() {
			if o != "" {
				names[o] = prefix + o
			}
		}
	}
	for j, o := range fp.GetOutput() {
		if _, written := names[o]; written && j < len(call.GetOutput()) && call.GetOutput()[j] != "" && !slices.Contains(fp.GetInput(), o) {
			names[o] = call.GetOutput()[j]
		}
	}
	return names
}

// adopt records where node np came from, for it and everything nested in
// its attributes.
func (t *functionTable) adopt(np *onnxpb.NodeProto, from origin) *onnxpb.NodeProto {
	t.origins[np] = from
	for _, ap := range np.GetAttribute() {
		for _, g := range graphsOf(ap) {
			for _, inner := range g.GetNode() {
				t.adopt(inner, from)
			}
		}
	}
	return np
}

// graphsOf lists the graphs an attribute holds.
func graphsOf(ap *onnxpb.AttributeProto) []*onnxpb.GraphProto {
	if ap.GetG() != nil {
		return append([]*onnxpb.GraphProto{ap.GetG()}, ap.GetGraphs()...)
	}
	return ap.GetGraphs()
}

// bindAttributes resolves the attributes of one body node: a reference
// (ref_attr_name) takes the node's attribute of that name, else the
// function's default, else leaves the attribute unset; a graph is copied
// with the function's values renamed in it (where its own names do not
// shadow them) and its references resolved alike.
func (t *functionTable) bindAttributes(aps []*onnxpb.AttributeProto, call map[string]*onnxpb.AttributeProto, f *function, names map[string]string) ([]*onnxpb.AttributeProto, error) {
	out := make([]*onnxpb.AttributeProto, 0, len(aps))
	for _, ap := range aps {
		ref := ap.GetRefAttrName()
		switch {
		case ref != "":
			src := call[ref]
			if src == nil {
				src = f.defaults[ref]
			}
			if src == nil {
				continue
			}
			if ap.Type != nil && src.Type != nil && ap.GetType() != src.GetType() {
				return nil, fmt.Errorf("attribute %q refers to %q, which is %s where %s is expected", ap.GetName(), ref, src.GetType(), ap.GetType())
			}
			c := proto.Clone(src).(*onnxpb.AttributeProto)
			c.Name = ap.Name
			out = append(out, c)
		case len(graphsOf(ap)) > 0:
			c := proto.Clone(ap).(*onnxpb.AttributeProto)
			for _, g := range graphsOf(c) {
				if err := t.bindGraph(g, call, f, names); err != nil {
					return nil, fmt.Errorf("attribute %q: %w", ap.GetName(), err)
				}
			}
			out = append(out, c)
		default:
			out = append(out, ap)
		}
	}
	return out, nil
}

// bindGraph renames, in a copy of a graph nested in the body, the
// function's values the graph reads from around it, and resolves its
// attribute references.
func (t *functionTable) bindGraph(g *onnxpb.GraphProto, call map[string]*onnxpb.AttributeProto, f *function, names map[string]string) error {
	outer := maps.Clone(names)
	for name := range localNames(g) {
		delete(outer, name)
	}
	for _, np := range g.GetNode() {
		for k, in := range np.GetInput() {
			if r, ok := outer[in]; ok {
				np.Input[k] = r
			}
		}
		var err error
		if np.Attribute, err = t.bindAttributes(np.GetAttribute(), call, f, outer); err != nil {
			return fmt.Errorf("node %q: %w", np.GetName(), err)
		}
	}
	for _, vi := range g.GetOutput() {
		if r, ok := outer[vi.GetName()]; ok {
			vi.Name = proto.String(r)
		}
	}
	return nil
}

// quoteAll formats names for errors: "a", "b"; "none" when empty.
func quoteAll(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// nodeOpset returns the version of a node's domain: from the model's
// imports, or for a node expanded from a function, from the function's
// (the model's where the function imports no version of the domain).
func (b *builder) nodeOpset(np *onnxpb.NodeProto) (int, error) {
	var imports map[string]int
	if b.funcs != nil {
		imports = b.funcs.origins[np].imports
	}
	d := np.GetDomain()
	if isDefaultDomain(d) {
		d = ""
	}
	v, ok := imports[d]
	switch {
	case !ok:
		return b.domainOpset(np.GetDomain())
	case d == "":
		return v, nil // checked against maxOpset when the call was expanded
	}
	newest, known := domainVersions[d]
	if !known {
		return b.domainOpset(np.GetDomain()) // its error names the domains the executor runs
	}
	if v < 1 || v > newest {
		return 0, fmt.Errorf("is in domain %q version %d (its function's import), which is not supported (1 to %d)", d, v, newest)
	}
	return v, nil
}
