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
	// (true hides a key) or "float" (added to the scores).
	PaddingMask, PaddingMaskKind string
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
	// Scale is the product of the factors applied to the scores.
	Scale float64
	// Causal reports that a mask hides exactly the future keys.
	Causal bool
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

var (
	buildersMu sync.RWMutex
	builders   []AttentionBuilder
)

// RegisterAttention makes a builder available to every lift; it panics on
// an empty or taken name or a nil Build, programming errors.
func RegisterAttention(b AttentionBuilder) {
	if b.Name == "" || b.Build == nil {
		panic(fmt.Sprintf("match: RegisterAttention %q without a name or Build", b.Name))
	}
	buildersMu.Lock()
	defer buildersMu.Unlock()
	for _, c := range builders {
		if c.Name == b.Name {
			panic(fmt.Sprintf("match: RegisterAttention called twice for %q", b.Name))
		}
	}
	builders = append(builders, b)
	slices.SortFunc(builders, func(x, y AttentionBuilder) int {
		return cmp.Or(cmp.Compare(x.Priority, y.Priority), cmp.Compare(x.Name, y.Name))
	})
}

// AttentionBuilders returns the registered builders in the order they are
// tried.
func AttentionBuilders() []AttentionBuilder {
	buildersMu.RLock()
	defer buildersMu.RUnlock()
	return append([]AttentionBuilder(nil), builders...)
}

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

var (
	mergesMu sync.RWMutex
	merges   []Merge
)

// RegisterMerge makes a merge available to every lift; it panics on an
// empty or taken name or a nil Merge, programming errors.
func RegisterMerge(m Merge) {
	if m.Name == "" || m.Merge == nil {
		panic(fmt.Sprintf("match: RegisterMerge %q without a name or Merge", m.Name))
	}
	mergesMu.Lock()
	defer mergesMu.Unlock()
	for _, c := range merges {
		if c.Name == m.Name {
			panic(fmt.Sprintf("match: RegisterMerge called twice for %q", m.Name))
		}
	}
	merges = append(merges, m)
	slices.SortFunc(merges, func(x, y Merge) int { return cmp.Compare(x.Name, y.Name) })
}

// Merges returns the registered merges sorted by name.
func Merges() []Merge {
	mergesMu.RLock()
	defer mergesMu.RUnlock()
	return slices.Clone(merges)
}
