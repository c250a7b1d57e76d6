package exec

import (
	"fmt"
	"strconv"

	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// node is one prepared operator application: its op resolved to a kernel,
// its attributes decoded once, and its inputs and outputs resolved to value
// slots of the run's environment.
type node struct {
	index  int    // position in the model's node list
	name   string // the model's node name, possibly empty
	op     string // the op type, prefixed by its domain outside the default one ("ai.onnx.preview.FlexAttention")
	opset  int    // the model's opset version of the node's domain
	spec   *opSpec
	attrs  map[string]attribute
	in     []int    // value slots; -1 for an omitted optional input
	out    []int    // value slots; -1 for an omitted optional output
	inName []string // the model's names of the inputs, for errors
	free   []int    // slots whose last reader is this node
}

// label names the node in errors: its name in quotes, or its position when
// the model leaves it unnamed.
func (n *node) label() string {
	if n.name != "" {
		return strconv.Quote(n.name)
	}
	return fmt.Sprintf("#%d", n.index)
}

// attrKind is an attribute's type, numbered as ONNX's
// AttributeProto.AttributeType.
type attrKind int

// The attribute kinds ops accept.
const (
	attrFloat   attrKind = 1
	attrInt     attrKind = 2
	attrString  attrKind = 3
	attrTensor  attrKind = 4
	attrGraph   attrKind = 5
	attrFloats  attrKind = 6
	attrInts    attrKind = 7
	attrStrings attrKind = 8
)

// String names the kind as ONNX does ("INT", "FLOATS"), from the
// generated AttributeProto enum, whose numbers the kinds share.
func (k attrKind) String() string {
	return onnxpb.AttributeProto_AttributeType(k).String()
}

// attribute is a decoded node attribute; kind says which field is set.
type attribute struct {
	kind   attrKind
	f      float32
	i      int64
	s      string
	floats []float32
	ints   []int64
	t      *value
	g      *subgraph // a GRAPH attribute, prepared to run (subgraph.go)
}

// has reports whether the node carries the attribute.
func (n *node) has(name string) bool {
	_, ok := n.attrs[name]
	return ok
}

// attrInt returns an INT attribute, or def when it is absent. Kinds were
// checked against the op's schema when the graph was prepared.
func (n *node) attrInt(name string, def int64) int64 {
	if a, ok := n.attrs[name]; ok {
		return a.i
	}
	return def
}

// attrFloat returns a FLOAT attribute, or def when it is absent.
func (n *node) attrFloat(name string, def float32) float32 {
	if a, ok := n.attrs[name]; ok {
		return a.f
	}
	return def
}

// attrString returns a STRING attribute, or def when it is absent.
func (n *node) attrString(name, def string) string {
	if a, ok := n.attrs[name]; ok {
		return a.s
	}
	return def
}

// attrGraph returns a GRAPH attribute, or nil when it is absent.
func (n *node) attrGraph(name string) *subgraph {
	return n.attrs[name].g
}

// attrInts returns an INTS attribute and whether it is present.
func (n *node) attrInts(name string) ([]int64, bool) {
	a, ok := n.attrs[name]
	return a.ints, ok
}

// opFunc computes an op's outputs from its inputs; in[i] is nil for an
// omitted optional input. It returns at least as many outputs as the node
// asks for (len(n.out)) and never writes into its inputs.
type opFunc func(rc *runCtx, n *node, in []*value) ([]*value, error)

// opSpec describes what the executor implements of one ONNX operator.
type opSpec struct {
	// since is the first opset version whose semantics run implements;
	// older versions differ (legacy broadcast attributes, consumed_inputs)
	// and are refused when the graph is prepared.
	since int
	// minIn and maxIn bound the number of inputs (maxIn -1: variadic);
	// inputs below minIn are required and may not be omitted.
	minIn, maxIn int
	// minOut and maxOut bound the number of outputs (maxOut -1: variadic).
	minOut, maxOut int
	// attrs lists the attributes the op accepts, with their kinds; any
	// other attribute is ignored with a warning, as ONNX Runtime ignores it.
	attrs map[string]attrKind
	// movedToInput lists attributes that later opsets replaced by inputs,
	// with the version that did: a node of that opset or later carrying
	// one is an error, since the kernel would silently ignore it.
	movedToInput map[string]int
	// runtimeSince, when set, is the first opset at which ONNX Runtime runs
	// the op in the default domain although ONNX standardized it only at
	// since (LayerNormalization: 1, not 17). Real files rely on it, so such
	// nodes run with a warning.
	runtimeSince int
	// packs lists the inputs of a fused node that are right-hand
	// matrices of its products, not transposed: packWeights packs them
	// once when they are constants (MatMul's and Gemm's it knows by op).
	packs []int
	// check, when set, validates a node's attributes when the graph is
	// prepared, so that a node the kernel would refuse at every run is
	// refused by New.
	check func(n *node) error
	run   opFunc
}

// one wraps a single output.
func one(v *value) ([]*value, error) { return []*value{v}, nil }

// oneOrErr wraps a single output or an error.
func oneOrErr(v *value, err error) ([]*value, error) {
	if err != nil {
		return nil, err
	}
	return []*value{v}, nil
}

// input returns in[i], or nil when the input is omitted or absent.
func input(in []*value, i int) *value {
	if i < len(in) {
		return in[i]
	}
	return nil
}
