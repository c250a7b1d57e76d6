package match

import (
	"cmp"
	"fmt"
)

// Op layers. Some ONNX ops are a whole layer, which the lifter reads from
// the op's attributes and the projections around it (ONNX's Attention op,
// opset 23 on); the lifter also needs a layer for one op of its own making
// (a Transpose of an attention's output to a sequence-first graph). The
// layer type that takes such an op registers it with a builder that turns
// what the lifter read into the layer's config, so that the lifter names
// no layer type and no config key; without one the op stays unlifted.

// AttentionOp is what the lifter read of one node of ONNX's Attention op
// and the projections around it. The lifter has checked what any layer
// needs (projections of tokens, heads of them, a mask it can express);
// the builder decides what its layer can take and writes its config.
type AttentionOp struct {
	// Width and KeyWidth are the feature widths of the query tokens and of
	// the key (and value) tokens; Cross reports that keys and values are
	// computed from other tokens than the queries.
	Width, KeyWidth int
	Cross           bool
	// Heads query heads of HeadDim features read KVHeads key and value
	// heads (fewer with grouped-query attention).
	Heads, KVHeads, HeadDim int
	// Q, K, V and Out are the parameters of the query, key, value and
	// output projections as nn.Linear's, "weight" then "bias" when it has
	// one, for the layer to name; OutSources are the initializers the
	// output projection's weight is computed from (Graph.Sources), whose
	// names may say what the model called it.
	Q, K, V, Out []Param
	OutSources   []string
	// Causal reports that a query sees no key after its position; TopLeft
	// that the frontier is aligned top-left (query i sees keys 0..i)
	// rather than bottom-right, which differ when queries and keys differ
	// in number.
	Causal, TopLeft bool
	// Window, when positive, is how many keys a query sees, itself
	// included, as attention.sdpa's window: the last ones when Causal, a
	// window centred on the query otherwise.
	Window int
	// Scale is the op's scale attribute, 0 when it has none (1/√HeadDim).
	Scale float32
	// Softcap is the op's softcap, 0 for none.
	Softcap float32
	// Mask is how the mask input masks the scores, "" without one: "keep"
	// (bool, nonzero attends), "mask" (bool, nonzero hides) or
	// "additive" (added to the scores).
	Mask string
	// ALiBi reports that the mask adds ALiBi's linear bias.
	ALiBi bool
	// QNorm and KNorm are RMSNorms of the queries and keys between the
	// projection and the rotation, nil when there are none: of each head
	// (Width HeadDim, Qwen3) or of the whole projections (Width
	// Heads·HeadDim and KVHeads·HeadDim, OLMo-2).
	QNorm, KNorm *RMSNorm
	// Rope is the rotation of queries and keys, nil when there is none.
	Rope *Rope
}

// Rope is the rotation of queries and keys by their positions
// (RotaryEmbedding, opset 23).
type Rope struct {
	// Interleaved rotates the pairs (x₀, x₁), (x₂, x₃), …; otherwise the
	// first half of the rotated features against the second.
	Interleaved bool
	// Base is θ's base, 0 when the caches cannot tell (a single rotating
	// pair turns by its position whatever the base).
	Base float64
	// Dim is how many features of each head rotate.
	Dim int
}

// Transpose is a layer that swaps axes Dim0 and Dim1 of its input.
type Transpose struct{ Dim0, Dim1 int }

// opLayer is one registration: the layer type ONNX op Op lifts to, and
// its builder, which takes what the lifter read as any.
type opLayer struct {
	Op, Type string
	build    func(read any) (*Layer, error)
}

// opLayers are the registered op layers, by op.
var opLayers = newList(func(x, y opLayer) int { return cmp.Compare(x.Op, y.Op) })

// RegisterOpLayer makes layerType the layer the lifter lifts every node of
// ONNX op op to, and build the function that writes the layer (its Config,
// Params and Notes) from what the lifter read: an *AttentionOp for "Attention", a
// Transpose for "Transpose". It panics on an empty or taken op, an empty
// type or a nil build, programming errors.
func RegisterOpLayer[R any](op, layerType string, build func(read R) (*Layer, error)) {
	opLayers.add("RegisterOpLayer", op, layerType == "" || build == nil, opLayer{Op: op, Type: layerType,
		build: func(read any) (l *Layer, err error) {
			r, ok := read.(R)
			if !ok {
				return nil, fmt.Errorf("the %s layer of ONNX op %s is built from %T, not %T", layerType, op, r, read)
			}
			defer func() {
				if v := recover(); v != nil {
					l, err = nil, fmt.Errorf("the %s layer of ONNX op %s: panic: %v", layerType, op, v)
				}
			}()
			return build(r)
		}})
}

// OpLayer returns the layer type ONNX op op lifts to, "" when none is
// registered.
func OpLayer(op string) string {
	if o, ok := findOpLayer(op); ok {
		return o.Type
	}
	return ""
}

// BuildOpLayer returns the layer ONNX op op lifts to, built from what the
// lifter read of one of its nodes, with its Type set; nil and no error
// when no layer type takes op, an error when its builder refuses.
func BuildOpLayer(op string, read any) (*Layer, error) {
	o, ok := findOpLayer(op)
	if !ok {
		return nil, nil
	}
	l, err := o.build(read)
	if err != nil || l == nil {
		return nil, err
	}
	l.Type = o.Type
	return l, nil
}

// findOpLayer returns the registration for op.
func findOpLayer(op string) (opLayer, bool) {
	for _, o := range opLayers.all() {
		if o.Op == op {
			return o, true
		}
	}
	return opLayer{}, false
}

// keepMaskRole is the key the keep-mask layer registers under among the op
// layers; no ONNX op has this name.
const keepMaskRole = "attention_mask (keep)"

// RegisterKeepMaskLayer makes layerType the layer the lifter computes a
// key-padding keep mask with when an op layer (ONNX's Attention op) reads
// Hugging Face's attention_mask, (B, S) of 1 for tokens and 0 for
// padding: the layer maps it to what attention reads with mask: bool and
// mask_polarity: keep. It panics when called twice or with an empty type,
// programming errors.
func RegisterKeepMaskLayer(layerType string) {
	opLayers.add("RegisterKeepMaskLayer", keepMaskRole, layerType == "", opLayer{Op: keepMaskRole, Type: layerType, build: noBuild})
}

// KeepMaskLayer returns the layer type registered by
// RegisterKeepMaskLayer, "" when none is.
func KeepMaskLayer() string { return OpLayer(keepMaskRole) }

// noBuild is the builder of a registration the lifter only asks the type
// of (the keep mask's layer).
func noBuild(any) (*Layer, error) { return nil, nil }
