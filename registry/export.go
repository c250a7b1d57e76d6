package registry

// Exporter is the optional interface of layers that can write themselves
// as ONNX: a layer that implements it works with `attnrun export` like a
// built-in. The exporter calls ExportONNX once per layer, in config order,
// with a GraphBuilder scoped to that layer.
//
// The graph computes the layer in eval mode (dropout is the identity) on
// batched values: every input and the output are float32 (B, T, d), B and
// T dynamic. A sketch, for a layer computing x Wᵀ with a parameter named
// "weight" of shape (d_out, d_in):
//
//	func (l *Proj) ExportONNX(g registry.GraphBuilder, inputs []string) (string, error) {
//		wt := g.Node("Transpose", []string{g.Param("weight")}, registry.IntsAttr("perm", 1, 0))
//		return g.Node("MatMul", []string{inputs[0], wt}), nil
//	}
type Exporter interface {
	// ExportONNX adds the nodes that compute the layer from the named input
	// values (in the order of the layer's inputs) and returns the name of
	// the value holding its output. It must not modify the layer.
	ExportONNX(g GraphBuilder, inputs []string) (output string, err error)
}

// GraphBuilder is what an Exporter writes its nodes with. It names every
// value and node under the layer's path, and owns the initializers: the
// model's parameters, stored under their model names ("attn.W_query.weight")
// in PyTorch's layout, which a layer reaches with Param.
//
// The methods return no errors, so that layer code reads top to bottom: a
// misuse (an unknown parameter, an attribute of an unsupported type, a
// constant whose shape does not match its values) is recorded, and the
// export then fails with an error naming the layer.
type GraphBuilder interface {
	// Opset is the version of the default ONNX operator set the graph
	// targets (13 to 25; the Attention and RotaryEmbedding ops exist from
	// 23, the Attention op's sliding windows from 25), for layers whose best
	// ops depend on it.
	Opset() int
	// Param returns the value name of one of the layer's own parameters,
	// given its name within the layer as Params lists it ("W_query.weight").
	Param(name string) string
	// Width returns the size of the last axis of one of the layer's input
	// values when the export knows it statically, and 0 when it is dynamic.
	Width(value string) int
	// Node adds a node with one output and returns the output's name.
	Node(op string, inputs []string, attrs ...Attr) string
	// NodeOutputs adds a node with n outputs and returns their names.
	NodeOutputs(op string, inputs []string, n int, attrs ...Attr) []string
	// ConstInt64 adds an int64 constant. dims is its shape; without dims it
	// is a vector of len(values).
	ConstInt64(values []int64, dims ...int64) string
	// ConstFloat adds a float32 constant. dims is its shape; without dims it
	// is a vector of len(values).
	ConstFloat(values []float32, dims ...int64) string
	// ScalarInt64 adds a rank-0 int64 constant, as Range and Gather take.
	ScalarInt64(v int64) string
	// ScalarFloat adds a rank-0 float32 constant.
	ScalarFloat(v float32) string
}

// Attr is one attribute of an ONNX node. Value is an int64 (INT), []int64
// (INTS), float32 (FLOAT), []float32 (FLOATS), string (STRING) or Graph
// (GRAPH); the helpers below build each kind.
type Attr struct {
	Name  string
	Value any
}

// IntAttr is an INT attribute, such as Softmax's axis.
func IntAttr(name string, v int64) Attr { return Attr{Name: name, Value: v} }

// IntsAttr is an INTS attribute, such as Transpose's perm.
func IntsAttr(name string, v ...int64) Attr { return Attr{Name: name, Value: v} }

// FloatAttr is a FLOAT attribute, such as LayerNormalization's epsilon.
func FloatAttr(name string, v float32) Attr { return Attr{Name: name, Value: v} }

// FloatsAttr is a FLOATS attribute.
func FloatsAttr(name string, v ...float32) Attr { return Attr{Name: name, Value: v} }

// StringAttr is a STRING attribute.
func StringAttr(name, v string) Attr { return Attr{Name: name, Value: v} }

// Graph is the value of a GRAPH attribute (AttributeProto.g), such as
// FlexAttention's score_mod: a body with inputs of its own, which Build
// writes with a GraphBuilder of its own, as ExportONNX writes a layer. The
// body may read by name any value of the graph around it (ONNX's outer
// scope): the layer's parameters (Param), and the values its nodes
// computed before the node that holds the attribute.
type Graph struct {
	// Inputs are the ranks of the body's inputs, float32 values the builder
	// names.
	Inputs []int
	// Build adds the body's nodes, given its inputs' names, and returns the
	// name of its output, a float32 value.
	Build func(body GraphBuilder, inputs []string) (output string)
}

// GraphAttr is a GRAPH attribute.
func GraphAttr(name string, g Graph) Attr { return Attr{Name: name, Value: g} }

// DomainBuilder is the optional interface of a GraphBuilder that may write
// ops of other operator set domains than ONNX's default one, such as the
// FlexAttention of ai.onnx.preview (export.Options.Preview allows
// that domain). A layer asserts it, asks for the domain's version, and
// writes default-domain ops when the export does not allow the domain.
type DomainBuilder interface {
	// DomainVersion is the version of the domain the export may use, 0
	// when it may not.
	DomainVersion(domain string) int
	// DomainNode adds a node of op from domain, with one output, and
	// returns the output's name; the model then imports the domain.
	DomainNode(domain, op string, inputs []string, attrs ...Attr) string
}

// InputDims is the optional interface of an exporting layer some of whose
// inputs are not token streams (batch, seq, d): attention masks, or token
// streams in another order (a sequence-first nn.MultiheadAttention's (seq,
// batch, d)). The exporter declares a model input that such a layer reads
// with the dimensions the layer gives, and probes widths with inputs of
// that rank.
type InputDims interface {
	// ONNXInputDims returns, for the layer given n inputs, a name for each
	// dimension of the inputs that are not (batch, seq, d) token streams,
	// by input position. The names "batch", "seq" and "d" make a token
	// stream with its axes in that order; any other names make a mask,
	// float32, every dimension symbolic and prefixed with the input's name:
	// a (Tq, Tk) mask {"queries", "keys"} is declared
	// (mask_queries, mask_keys). A name that is a positive number is a
	// fixed dimension of that size (an image's {"batch", "3", "224", "224"}).
	// Inputs not in the map are (batch, seq, d).
	ONNXInputDims(n int) map[int][]string
}
