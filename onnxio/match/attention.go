package match

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
)

// Attention builders. The lifter recognizes softmax attention itself:
// softmax(scale · (Q Kᵀ) [masked]) V with Q, K and V projections of the
// tokens (or none), split into heads and merged however the exporter
// wrote it, with an optional output projection. Which layer that
// structure is, and with what config, is the business of the layers: each
// registers an AttentionBuilder, and the lifter offers every recognized
// self-attention to the builders by priority until one claims it.

// Attention is a recognized attention, as a builder sees it.
type Attention struct {
	// Queries and Keys are the token tensors queries and keys (and
	// values) are computed from; they differ for cross-attention.
	Queries, Keys string
	// Cross reports cross-attention: Keys is not Queries.
	Cross bool
	// KeyWidth is the key tokens' feature width.
	KeyWidth int
	// BatchFirst reports that the query tokens are (B, T, d), not (T, d).
	BatchFirst bool
	// PaddingMask is the graph input a key padding mask is computed from,
	// "" when there is none; PaddingMaskKind says how it masks: "bool"
	// (true hides a key) or "float" (added to the scores). With kind
	// "keep", PaddingMask is the value added to the scores, computed from
	// the graph input KeepInput (Hugging Face's attention_mask, 1 for a
	// token): a builder that takes it lifts the nodes between the two to a
	// layer of its own in Layer.Before.
	PaddingMask, PaddingMaskKind string
	KeepInput                    string
	// KeepFill, when not 0, says KeepInput (1 for a token) becomes the
	// additive PaddingMask as (1 − m)·KeepFill; KeepLengths, when set, that
	// KeepInput holds each sequence's length, counted against the tokens
	// KeepLengths names.
	// KeepNodes are the nodes that compute the mask from KeepInput when
	// KeepLengths or KeepContext is set (the tokens only give its length,
	// so the nodes are not those between the two inputs and the mask).
	KeepFill    float64
	KeepLengths string
	KeepNodes   []*Node
	// KeepContext, with kind "keep", says KeepInput is a keep mask over
	// the positions of the whole context, (B, 1, rows, columns), of which
	// the graph reads the block of the queries' rows and the keys'
	// columns (Megatron's GPT-2 slices its rows at the KV cache's
	// length): its layer reads the Queries too, for their number.
	KeepContext bool
	// AverageWeights reports that every graph output of the attention
	// weights averages them over heads (true when there is none).
	AverageWeights bool
	// Width is the tokens' feature width; Tokens their number per
	// sequence at the last probe shape.
	Width, Tokens int
	// Probes is how many probe shapes the graph was read at.
	Probes int
	// Heads and HeadDim are the head split.
	Heads, HeadDim int
	// KVHeads is the number of key and value heads: Heads, or fewer with
	// grouped-query attention (query head h reads key head
	// h / (Heads / KVHeads)).
	KVHeads int
	// Scale is the product of the factors applied to the scores.
	Scale float64
	// Causal reports that a mask hides exactly the future keys.
	Causal bool
	// ScoreShift is a number added to every scaled score alike (a mask of
	// zeros folded into the graph, hiding every key), 0 for none; only a
	// builder that adds it (score_mod) may claim the attention.
	ScoreShift float64
	// Context is the size of the mask buffer a causal mask is cut from,
	// 0 when there is none.
	Context int
	// Projected reports that queries, keys and values each come from a
	// projection; otherwise none does.
	Projected bool
	// SameSource reports that, unprojected, queries, keys and values are
	// one tensor.
	SameSource bool
	// Matrix reports that the three projections are bare (in, out)
	// matrices used as x @ W rather than nn.Linear weights.
	Matrix bool
	// Biased reports that the query projection has a bias.
	Biased bool
	// Out is the output projection, nil when there is none.
	Out *Linear
	// Projections are the query, key and value projections (nil when not
	// projected), and Segments the first output column each one's heads
	// start at (a packed in_proj holds all three).
	Projections [3]*Linear
	Segments    [3]int
	// Registered reports whether a layer type is available to lift into.
	Registered func(layerType string) bool
	// QKV lists W_query, W_key and W_value (each weight, then its bias) as
	// parameters under prefix, each restricted to width columns from its
	// heads' first; matrix lists the bare (in, out) matrices instead. It
	// reports whether they have biases.
	QKV func(prefix string, width int, matrix bool) ([]Param, bool, error)
}

// AttentionBuilder turns a recognized attention into a layer.
type AttentionBuilder struct {
	// Name identifies the builder; by convention its layer type.
	Name string
	// Priority orders the builders: lower first, then by name.
	Priority int
	// Build returns the layer (Type, Config, Params and Notes, and Inputs
	// when the layer reads more than the query tokens; the lifter knows
	// its output and nodes), nil to leave the attention to the next
	// builder, or an error saying why the layer cannot express it.
	Build func(a *Attention) (*Layer, error)
}

// builders are the registered attention builders, by priority, then name.
var builders = newList(func(x, y AttentionBuilder) int {
	return cmp.Or(cmp.Compare(x.Priority, y.Priority), cmp.Compare(x.Name, y.Name))
})

// RegisterAttention makes a builder available to every lift; it panics on
// an empty or taken name or a nil Build, programming errors.
func RegisterAttention(b AttentionBuilder) {
	builders.add("RegisterAttention", b.Name, b.Build == nil, b)
}

// AttentionBuilders returns the registered builders in the order they are
// tried.
func AttentionBuilders() []AttentionBuilder { return builders.all() }

// Merge joins a lifted layer and the layers that compute all of its inputs
// into one layer: attention.multihead_wrapper is an nn.concat of
// independent attention.causal heads. The lifter offers it every layer
// whose inputs are each computed by a lifted layer that nothing else reads
// (and that returns no attention weights).
type Merge struct {
	// Name identifies the merge; by convention the merged layer's type.
	Name string
	// Merge returns the merged layer (its Type, Name, Inputs, Config and
	// Params; the lifter takes the output and the nodes of all of them),
	// or nil when the layers are not its.
	Merge func(outer *Layer, inner []*Layer) *Layer
}

// merges are the registered merges, by name.
var merges = newList(func(x, y Merge) int { return cmp.Compare(x.Name, y.Name) })

// RegisterMerge makes a merge available to every lift; it panics on an
// empty or taken name or a nil Merge, programming errors.
func RegisterMerge(m Merge) { merges.add("RegisterMerge", m.Name, m.Merge == nil, m) }

// Merges returns the registered merges sorted by name.
func Merges() []Merge { return merges.all() }

// list is a registry of named items kept sorted, safe for concurrent use.
type list[T any] struct {
	mu    sync.RWMutex
	items []T
	names map[string]bool
	order func(x, y T) int
}

// newList returns an empty list sorted by order.
func newList[T any](order func(x, y T) int) *list[T] {
	return &list[T]{names: map[string]bool{}, order: order}
}

// add registers item under name; it panics (naming the function what) on
// an empty or taken name, or when missing says the item lacks its func.
func (l *list[T]) add(what, name string, missing bool, item T) {
	if name == "" || missing {
		panic(fmt.Sprintf("match: %s %q without a name or function", what, name))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.names[name] {
		panic(fmt.Sprintf("match: %s called twice for %q", what, name))
	}
	l.names[name] = true
	l.items = append(l.items, item)
	slices.SortFunc(l.items, l.order)
}

// all returns the items in order.
func (l *list[T]) all() []T {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.items)
}

// SubgraphLayer makes the layer that runs a piece of a graph no other
// layer lifts (onnx.subgraph), for the lifter's partial mode: model is the
// piece as an encoded ONNX ModelProto whose inputs are the layer's inputs,
// then the parameters params names. It returns the layer's Type and
// Config.
type SubgraphLayer func(model []byte, params []string) *Layer

var (
	subgraphMu sync.RWMutex
	subgraph   SubgraphLayer
)

// RegisterSubgraph sets the SubgraphLayer; it panics when one is set
// already or f is nil, programming errors.
func RegisterSubgraph(f SubgraphLayer) {
	subgraphMu.Lock()
	defer subgraphMu.Unlock()
	if f == nil || subgraph != nil {
		panic("match: RegisterSubgraph called twice or with nil")
	}
	subgraph = f
}

// Subgraph returns the registered SubgraphLayer, or nil.
func Subgraph() SubgraphLayer {
	subgraphMu.RLock()
	defer subgraphMu.RUnlock()
	return subgraph
}
