package match

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/onnxio/graph"
)

// Lift patterns. A layer type teaches the lifter (package lift, what
// `attnrun import` runs) its structure in ONNX graphs with a Pattern,
// registered from an init function next to its registry.Register:
//
//	func init() {
//		match.RegisterPattern(match.Pattern{Name: "attention.cosine", Op: "Softmax", Match: matchCosine})
//	}
//
// The pattern API lives here rather than in package lift so that layers
// can register patterns without importing the lifter (which imports
// models, which imports the layers). The lifter offers, in graph order,
// every node of a pattern's Op that no layer has claimed to the registered
// patterns, sorted by name; the first that returns a Layer claims it. The
// layer is then wired, built and checked against the graph like any other:
// a pattern that recognizes the wrong thing yields an error naming the
// mismatch, never a wrong model.

// Pattern recognizes one layer type in ONNX graphs by its structure.
type Pattern struct {
	// Name identifies the pattern in reports ("pattern attention.cosine: ...");
	// by convention the ID of the layer type it lifts to. It must be unique.
	Name string
	// Op is the op type of the anchor node a match starts from, typically
	// "Softmax" for an attention variant.
	Op string
	// Late offers the pattern only the nodes left once the attention
	// recognizers and every pattern that is not late have had their turn,
	// in graph order together with the lifter's remaining recognizers: the
	// tier of layers that stand alone (a residual Add, a Concat), which
	// would otherwise claim parts of larger structures.
	Late bool
	// Priority orders the patterns offered one node: lower first, then by
	// name (nn.mlp before the nn.linear it starts with).
	Priority int
	// Match looks at the structure around anchor. It returns (nil, nil) when
	// the structure is not this pattern's, so that other patterns and the
	// unlifted report have their turn; an error when it is, but cannot be
	// lifted (the error becomes the anchor's reason in the report); or the
	// Layer the structure lifts to. g is valid only during the call.
	Match func(g Graph, anchor *Node) (*Layer, error)
}

// Layer is what a Pattern lifts a part of the graph to: one attnrun layer.
// The nodes it replaces are found from Inputs and Output: every node
// between them. No value computed in between may be read from outside.
type Layer struct {
	// Type is the registered layer type, "attention.cosine".
	Type string
	// Config is the layer's config, written in this order after its name,
	// type and inputs: {d_in: 4, d_out: 3, causal: true}.
	Config []Field
	// Inputs are the graph values the layer reads, in the order of its
	// config's inputs; typically one, the token tensor.
	Inputs []string
	// Output is the graph value the layer computes.
	Output string
	// Params are the layer's parameters under their names within the
	// layer, with where the graph holds them; the lifter loads them into
	// the model, and every parameter of the layer must be among them.
	Params []Param
	// Notes are assumptions the pattern made, shown with the result.
	Notes []string
	// Name is the layer's name in the config when the graph's node names
	// suggest none, and names the structure in reports; "" means the type
	// with its dots as underscores.
	Name string
	// Nodes are the nodes the layer replaces; empty means every node
	// between Inputs and Output.
	Nodes []*Node
	// IndexBound, when positive, says the layer reads its one input as
	// indices below it (an embedding table's rows): the lifter's
	// self-check feeds that input ids that look up every row.
	IndexBound int
	// Before are layers found with this one that compute some of its
	// inputs, lifted once however many layers read them: the layer an
	// attention builder makes of a keep mask (Attention.KeepInput).
	Before []*Layer
	// KeepMasks are the graph inputs among Inputs that the layer reads as
	// keep masks (nonzero attends; PyTorch SDPA's bool attn_mask, Hugging
	// Face's attention_mask). The lifter's self-check feeds them as models
	// meet them, with every other key of every row kept (the first, and one
	// in every sliding window of two keys or more): a query
	// that sees no key is where exporters' masks differ (a fill of −Inf or
	// of finfo.min) and no layer can follow both.
	KeepMasks []string
}

// Refusal is the error of a pattern that recognizes a structure but
// cannot lift it. The lifter reports its reason as it is (other errors
// follow the pattern's name, "pattern attention.cosine: ..."), for the
// nodes it names rather than the anchor alone; so the reason should name
// the rule the structure breaks ("nn.concat joins features").
type Refusal struct {
	// Nodes are the nodes of the structure; empty means the anchor.
	Nodes []*Node
	// Reason says what the structure lacks.
	Reason string
}

// Error returns the reason.
func (r *Refusal) Error() string { return r.Reason }

// Refuse returns a Refusal over nodes with a formatted reason.
func Refuse(nodes []*Node, format string, args ...any) *Refusal {
	return &Refusal{Nodes: nodes, Reason: fmt.Sprintf(format, args...)}
}

// Field is one key of a lifted layer's config and its value.
type Field struct {
	// Key is the yaml key of the layer's config field, "d_in".
	Key string
	// Value is a string, a number, a bool or a []string, marshaled as
	// YAML (a float32 at float32 precision: 0.3, not 0.30000001192092896).
	Value any
}

// Param is one parameter of a lifted layer.
type Param struct {
	// Name is the parameter's name within the layer, "W_query.weight".
	Name string
	// Value holds its numbers, in the layout the layer's Params uses
	// (nn.Linear weights (out, in)).
	Value *tensor.Dense
	// From is the graph value it was read from, for the mapping table;
	// "" when the numbers were computed rather than read.
	From string
	// Transposed records that the graph holds the value transposed, as
	// MatMul holds nn.Linear weights (in, out).
	Transposed bool
	// Rows, when set, are the rows [lo, hi) of the (transposed) graph
	// value the parameter takes: one projection of a packed in_proj.
	Rows []int
	// Pieces, when set, say where the blocks of a parameter stacked from
	// several graph values come from, in order (nn.MultiheadAttention's
	// in_proj_weight from three projections); From, Transposed and Rows
	// are then unused.
	Pieces []Piece
}

// Piece is a block of a parameter's rows read from one graph value.
type Piece struct {
	// From and Transposed are as in Param.
	From       string
	Transposed bool
	// Lo and Hi are the rows [Lo, Hi) of the (transposed) value the block
	// takes; Split says they are not all of its rows.
	Lo, Hi int
	Split  bool
}

// Graph is the view of an ONNX graph a Pattern matches against: who
// produces and who reads each value, and the numbers static values hold.
// The lifter implements it.
//
// Values are named as in the graph. A value is data when it depends on the
// contents of the graph inputs, and static otherwise: computed from
// initializers, Constants and input shapes alone. Static values are
// evaluated by running the graph at probe shapes (two sizes for a dynamic
// graph), so a pattern reads a scale or an axis however the exporter
// computed it.
type Graph interface {
	// Opset is the graph's default-domain opset version.
	Opset() int
	// Producer returns the node that computes a value, or nil for a graph
	// input or an initializer.
	Producer(value string) *Node
	// Readers returns the nodes that read a value's contents (not merely
	// its shape) and contribute to some graph output, in graph order.
	Readers(value string) []*Node
	// IsData reports whether a value depends on the contents of the graph
	// inputs; a static value does not.
	IsData(value string) bool
	// IsOutput reports whether a value is one of the graph's outputs.
	IsOutput(value string) bool
	// Shape returns a value's shape at the first probe shape. Symbolic
	// sizes are set to small numbers there: use it for ranks and fixed
	// sizes such as feature widths.
	Shape(value string) ([]int, error)
	// Probes is how many probe shapes the graph was evaluated at: 1 for a
	// graph of fixed sizes, 2 for a dynamic one, so that a structure that
	// holds by coincidence at one size is caught at the other.
	Probes() int
	// ShapeAt and ValueAt return a value's shape and contents at probe i
	// (0 ≤ i < Probes()).
	ShapeAt(i int, value string) ([]int, error)
	// ValueAt returns a value's contents at probe i.
	ValueAt(i int, value string) (*tensor.Dense, error)
	// ScalarAt returns the number a single-element value holds at probe i,
	// and whether it is one.
	ScalarAt(i int, value string) (float64, bool)
	// Sources lists the initializers and Constant outputs a static value is
	// computed from, itself included, in the order a depth-first walk
	// meets them; nil for a data value.
	Sources(value string) []string
	// Constant returns a static value that is the same at every probe
	// shape: a weight, an axis list, an epsilon. A value that changes with
	// the input shapes (a mask cut to the sequence length) is an error.
	Constant(value string) (*tensor.Dense, error)
	// Scalar returns the number a static single-element value holds, the
	// same at every probe shape, and whether it is one.
	Scalar(value string) (float64, bool)
	// Linear recognizes the nn.Linear that computes a value, however the
	// exporter wrote it (MatMul by a static matrix with an optional Add of
	// a bias, or Gemm), and reports whether there is one.
	Linear(value string) (*Linear, bool)
	// Registered reports whether a layer type is available to lift into,
	// so that a pattern can say what a build without it cannot lift.
	Registered(layerType string) bool
	// Scores follows a Softmax back to the product of queries and keys it
	// normalizes (WalkScores): through scale factors (Mul or Div by a
	// static scalar) and static masks (Where with -inf, or an added
	// 0/-inf tensor), checking at every probe shape that a mask hides
	// exactly the future keys. It fails when the softmax is not over the
	// last axis, when the scores are masked by values computed from graph
	// inputs (a padding mask), or when a mask is not causal.
	Scores(softmax *Node) (*Scores, error)
	// KeepMask reads a value added to the scores as the mask Hugging Face
	// builds from its attention_mask: computed from one graph input of
	// shape (batch, keys), 1 for the keys a sequence attends to and 0 for
	// padding, it is 0 where the key is kept and −Inf (or at most −1e4)
	// where it is padding, or, when Causal, also after each query
	// (bottom-right), and beyond a sliding window (looking back, or
	// centred on the query). It is read by feeding the input patterns at every
	// probe shape; a value that is no such mask is an error that says why.
	KeepMask(value string) (*KeepMask, error)
	// Stretched evaluates a static value of two or more axes once more,
	// with the symbolic dimensions that size its last two axes at the
	// first probe set to n (the others as there): a bias over queries
	// and keys read at distances the probes are too short to show.
	Stretched(value string, n int) (*tensor.Dense, error)
}

// KeepMask is a mask of the scores computed from a keep mask input
// (Graph.KeepMask).
type KeepMask struct {
	// Input is the graph input, (batch, keys).
	Input string
	// Causal records that the mask also hides the keys after each query.
	Causal bool
	// Window, when positive, is how many keys a query sees, itself
	// included, as attention.sdpa's window: with Causal the mask hides
	// the keys Window or more positions before it (a sliding window);
	// without, the window is centred on the query and the mask hides the
	// keys more than (Window − 1)/2 positions away on either side (an
	// encoder's local attention).
	Window int
}

// Linear is an nn.Linear found in the graph: Output = Input Weightᵀ + Bias.
type Linear struct {
	// Input and Output are the graph values it reads and computes.
	Input, Output string
	// In and Out are its input and output widths.
	In, Out int
	// Weight is (Out, In), as nn.Linear stores it; Bias is (Out), or nil.
	Weight, Bias *tensor.Dense
	// WeightFrom and BiasFrom name the graph values they are read from.
	WeightFrom, BiasFrom string
	// Transposed records that the graph holds the weight as (In, Out).
	Transposed bool
	// Nodes are the nodes it is computed by, the MatMul or Gemm first.
	Nodes []*Node
	// Blocks, when set, are the blocks of rows [lo, hi) of the (transposed)
	// graph weight and bias that Weight and Bias stack, in order: a
	// projection taken from a packed one a block per head (GPT-NeoX's
	// query_key_value).
	Blocks [][2]int
}

// Params lists the Linear as nn.Linear's parameters under a prefix:
// "<prefix>.weight", then "<prefix>.bias" if it has one ("weight" and
// "bias" for an empty prefix), with where the graph holds them.
func (l *Linear) Params(prefix string) []Param {
	if prefix != "" {
		prefix += "."
	}
	ps := []Param{{Name: prefix + "weight", Value: l.Weight, From: l.WeightFrom, Transposed: l.Transposed}}
	if l.Bias != nil {
		ps = append(ps, Param{Name: prefix + "bias", Value: l.Bias, From: l.BiasFrom})
	}
	if l.Blocks != nil {
		for i := range ps {
			for _, b := range l.Blocks {
				ps[i].Pieces = append(ps[i].Pieces, Piece{From: ps[i].From, Transposed: ps[i].Transposed, Lo: b[0], Hi: b[1], Split: true})
			}
		}
	}
	return ps
}

// Scores is the chain from a product of queries and keys to the softmax
// over it.
type Scores struct {
	// Product is the MatMul of the queries and the transposed keys.
	Product *Node
	// Scale is the product of the scalar factors applied to the scores.
	Scale float64
	// Causal reports that a mask hides every key after its query's position
	// and nothing else; false means no score is masked.
	Causal bool
}

// Node is a node of the Graph.
type Node struct {
	n *graph.Node
}

// NewNode wraps a node of an indexed graph for patterns.
func NewNode(n *graph.Node) *Node { return &Node{n: n} }

// Unwrap returns the indexed graph's node.
func (n *Node) Unwrap() *graph.Node { return n.n }

// Op is the node's op type.
func (n *Node) Op() string { return n.n.GetOpType() }

// Name is the node's name, or "#index (op)" when the exporter left it
// unnamed; for messages.
func (n *Node) Name() string { return n.n.Label() }

// Inputs are the values the node reads, in order ("" for an omitted
// optional input).
func (n *Node) Inputs() []string { return slices.Clone(n.n.GetInput()) }

// Outputs are the values the node writes, in order.
func (n *Node) Outputs() []string { return slices.Clone(n.n.GetOutput()) }

// Output is the node's first output.
func (n *Node) Output() string {
	if outs := n.n.GetOutput(); len(outs) > 0 {
		return outs[0]
	}
	return ""
}

// Int returns an integer attribute, or def when the node does not have it.
func (n *Node) Int(name string, def int64) int64 { return n.n.Int(name, def) }

// Float returns a float attribute, or def when the node does not have it.
func (n *Node) Float(name string, def float32) float32 { return n.n.Float(name, def) }

// StringAttr returns a string attribute (Gelu's approximate), or def when the
// node does not have it.
func (n *Node) StringAttr(name, def string) string { return n.n.StringAttr(name, def) }

// Has reports whether the node has an attribute.
func (n *Node) Has(name string) bool { return n.n.Attr(name) != nil }

// Ints returns an integer-list attribute (Transpose's perm), or nil.
func (n *Node) Ints(name string) []int64 { return n.n.Ints(name) }

// patterns are the registered patterns, by priority, then name, so that
// the order they are tried in does not depend on package initialization
// order.
var patterns = newList(func(x, y Pattern) int {
	return cmp.Or(cmp.Compare(x.Priority, y.Priority), cmp.Compare(x.Name, y.Name))
})

// RegisterPattern makes a pattern available to every lift. It is meant to
// be called from init and panics if the name is empty or taken, the op is
// empty, or Match is nil: programming errors that must surface at start-up,
// as with registry.Register.
func RegisterPattern(p Pattern) {
	switch {
	case p.Name == "":
		panic("match: RegisterPattern with an empty name")
	case p.Op == "":
		panic(fmt.Sprintf("match: RegisterPattern %q with an empty anchor op", p.Name))
	case p.Match == nil:
		panic(fmt.Sprintf("match: RegisterPattern %q with a nil Match", p.Name))
	}
	patterns.add("RegisterPattern", p.Name, false, p)
}

// Patterns lists the names of the registered patterns, sorted.
func Patterns() []string {
	var names []string
	for _, p := range Registered() {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// Registered returns the registered patterns sorted by priority, then
// name.
func Registered() []Pattern { return patterns.all() }
