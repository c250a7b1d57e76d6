package layers

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"

	"github.com/attnrun/attnrun/internal/catalog"
	"github.com/attnrun/attnrun/internal/yamlkeys"
	"github.com/attnrun/attnrun/registry"
	"go.yaml.in/yaml/v3"
)

// ScoreMod is a score modification: what PyTorch's flex_attention calls a
// score_mod, score_mod(score, b, h, q_idx, kv_idx) → score, as a Go type.
// attention.sdpa applies the modifications its score_mod field lists to
// the scaled (and soft-capped) scores, before its masks.
//
// A ScoreMod is configured from YAML like a layer: its exported fields with
// yaml tags are the keys that follow `type` in
//
//	score_mod: {type: softcap, cap: 30}
//
// and a new type becomes available to every config with RegisterScoreMod,
// from the init function of any package (see the example).
//
// A modification that returns −Inf for a key whatever the score (it is
// asked about a score of 0) hides that key as the causal frontier does: its
// score is replaced by −Inf even when it is NaN, and a query whose every
// key is hidden gets weights of 0 (masked_rows: zeros). document_mask works
// that way.
type ScoreMod interface {
	// Prepare checks the fields for a layer of the given shape and
	// allocates the parameters, if the modification has any. It is called
	// by the layer's Validate, before any other method.
	Prepare(shape ScoreModShape) error
	// Modify changes, in place, the scores of query q of sequence b, query
	// head h: row[j] is its score for key k0+j. q and the keys are indices
	// within their sequences, 0 at the first token (after an incremental
	// step, the tokens decoded so far count). Modify is called from several
	// goroutines at once and must not change the modification.
	Modify(row []float32, b, h, q, k0 int)
	// ExportONNX adds the nodes that modify scores, a float32 value of
	// shape (B, H, Tq, Tk), and returns the modified value. ix gives the
	// indices of that shape's axes. The same code writes the main graph of
	// a standard-op export and FlexAttention's score_mod subgraph.
	ExportONNX(g registry.GraphBuilder, scores string, ix *ScoreIndices) string
}

// ScoreModParams is the optional interface of a ScoreMod with learned
// parameters, listed after the layer's own: "score_mod.<name>" for a
// single modification, "score_mod.<i>.<name>" in a list, as nn.Module and
// nn.ModuleList would name them.
type ScoreModParams interface {
	// Params lists the parameters Prepare allocated, in a fixed order.
	Params() []registry.Param
}

// ScoreModPlanner is the optional interface of a ScoreModParams that can
// list its parameters, names and shapes as Params will list them, before
// Prepare allocates them: the model's memory budget (registry.Provisioner)
// then refuses an oversized modification before anything is allocated,
// and `attnrun inspect` counts its parameters without allocating them. A
// modification without it allocates in Prepare, outside the budget.
type ScoreModPlanner interface {
	// PlanParams checks the fields as Prepare does and lists the
	// parameters Prepare would allocate, allocating nothing.
	PlanParams(shape ScoreModShape) ([]registry.ParamShape, error)
}

// ScoreModShape is what a score modification knows of its layer.
type ScoreModShape struct {
	// Heads is the number of query heads: h in Modify is 0..Heads−1.
	Heads int
	// HeadDim is the width of a head.
	HeadDim int
}

// ScoreModInfo describes a score modification type.
type ScoreModInfo struct {
	// Type is the name configs use: `type: softcap`. Lowercase letters,
	// digits, '_' and '.', starting with a letter; outside modules should
	// prefix theirs ("mylab.bias").
	Type string
	// Summary is one line for listings.
	Summary string
	// New returns a zero modification, into which a config is decoded.
	New func() ScoreMod
}

// scoreMods are the registered score modification types, by type.
var scoreMods catalog.Catalog[ScoreModInfo]

var scoreModType = regexp.MustCompile(`^[a-z][a-z0-9_.]*$`)

// RegisterScoreMod makes a score modification type available to every
// attention.sdpa config. It is meant to be called from init and panics on
// an invalid or taken type, or a nil New, as registry.Register does.
func RegisterScoreMod(info ScoreModInfo) {
	switch {
	case !scoreModType.MatchString(info.Type):
		panic(fmt.Sprintf("layers: RegisterScoreMod with type %q (want lowercase letters, digits, '_' and '.', starting with a letter)", info.Type))
	case info.New == nil:
		panic(fmt.Sprintf("layers: RegisterScoreMod %q with a nil New", info.Type))
	}
	if !scoreMods.Add(info.Type, info) {
		panic(fmt.Sprintf("layers: RegisterScoreMod called twice for %q", info.Type))
	}
}

// ScoreModTypes lists the registered score modification types, sorted.
func ScoreModTypes() []string { return scoreMods.Names() }

// LookupScoreMod returns a registered score modification type.
func LookupScoreMod(typ string) (ScoreModInfo, error) {
	info, ok := scoreMods.Get(typ)
	if !ok {
		return ScoreModInfo{}, fmt.Errorf("score_mod type %q is not registered (registered: %s; forgotten import?)", typ, strings.Join(ScoreModTypes(), ", "))
	}
	return info, nil
}

// ScoreMods is the score_mod field of a layer config: one modification,
//
//	score_mod: {type: softcap, cap: 30}
//
// or a list of them, applied in order:
//
//	score_mod: [{type: alibi}, {type: document_mask, lengths: [3, 5]}]
//
// The zero value is none.
type ScoreMods struct {
	entries []scoreModEntry
	list    bool // written as a list: parameters are named score_mod.<i>.<name>
}

// scoreModEntry is one configured modification and its type.
type scoreModEntry struct {
	typ string
	mod ScoreMod
}

// NewScoreMods builds the field from Go values: one modification unless
// there are several. Types are the registered ones the values came from.
func NewScoreMods(types []string, mods []ScoreMod) (ScoreMods, error) {
	if len(types) != len(mods) {
		return ScoreMods{}, fmt.Errorf("%d types for %d score modifications", len(types), len(mods))
	}
	var m ScoreMods
	for i, typ := range types {
		if _, err := LookupScoreMod(typ); err != nil {
			return ScoreMods{}, err
		}
		m.entries = append(m.entries, scoreModEntry{typ: typ, mod: mods[i]})
	}
	m.list = len(mods) > 1
	return m, nil
}

// Len is the number of modifications.
func (m ScoreMods) Len() int { return len(m.entries) }

// IsZero reports whether there is no modification (yaml's omitempty).
func (m ScoreMods) IsZero() bool { return len(m.entries) == 0 }

// Types lists the modifications' types, in order.
func (m ScoreMods) Types() []string {
	types := make([]string, len(m.entries))
	for i, e := range m.entries {
		types[i] = e.typ
	}
	return types
}

// mods lists the modifications, in order.
func (m ScoreMods) mods() []ScoreMod {
	mods := make([]ScoreMod, len(m.entries))
	for i, e := range m.entries {
		mods[i] = e.mod
	}
	return mods
}

// UnmarshalYAML decodes one modification (a mapping with a type) or a list
// of them, each strictly: a key that is not a field of its type is an
// error naming the type's fields.
func (m *ScoreMods) UnmarshalYAML(n *yaml.Node) error {
	*m = ScoreMods{}
	switch n.Kind {
	case yaml.MappingNode:
		e, err := decodeScoreMod(n, "score_mod")
		if err != nil {
			return err
		}
		m.entries = []scoreModEntry{e}
		return nil
	case yaml.SequenceNode:
		for i, item := range n.Content {
			e, err := decodeScoreMod(item, fmt.Sprintf("score_mod[%d]", i))
			if err != nil {
				return err
			}
			m.entries = append(m.entries, e)
		}
		m.list = true
		return nil
	}
	return fmt.Errorf("line %d: score_mod must be a mapping with a type ({type: softcap, cap: 30}) or a list of them", n.Line)
}

// decodeScoreMod decodes one {type: ..., fields...} mapping.
func decodeScoreMod(n *yaml.Node, where string) (scoreModEntry, error) {
	if n.Kind != yaml.MappingNode {
		return scoreModEntry{}, fmt.Errorf("line %d: %s must be a mapping with a type ({type: softcap, cap: 30})", n.Line, where)
	}
	var typ string
	fields := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	var keys []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.Value == "type" {
			if err := val.Decode(&typ); err != nil {
				return scoreModEntry{}, fmt.Errorf("line %d: %s: type: %v", val.Line, where, err)
			}
			continue
		}
		fields.Content = append(fields.Content, key, val)
		keys = append(keys, key)
	}
	if typ == "" {
		return scoreModEntry{}, fmt.Errorf("line %d: %s needs a type (one of: %s)", n.Line, where, strings.Join(ScoreModTypes(), ", "))
	}
	info, err := LookupScoreMod(typ)
	if err != nil {
		return scoreModEntry{}, fmt.Errorf("line %d: %s: %v", n.Line, where, err)
	}
	mod := info.New()
	allowed := yamlkeys.Of(reflect.TypeOf(mod))
	for _, key := range keys {
		if !allowed[key.Value] {
			names := yamlkeys.Sorted(allowed)
			list := "none"
			if len(names) > 0 {
				list = strings.Join(names, ", ")
			}
			return scoreModEntry{}, fmt.Errorf("line %d: %s (%s): unknown field %q (fields: %s)", key.Line, where, typ, key.Value, list)
		}
	}
	if err := fields.Decode(mod); err != nil {
		return scoreModEntry{}, fmt.Errorf("%s (%s): %w", where, typ, err)
	}
	return scoreModEntry{typ: typ, mod: mod}, nil
}

// MarshalYAML writes the modifications back as they were configured: a
// mapping, or a list of mappings, each with its type first.
func (m ScoreMods) MarshalYAML() (any, error) {
	nodes := make([]*yaml.Node, len(m.entries))
	for i, e := range m.entries {
		var n yaml.Node
		if err := n.Encode(e.mod); err != nil {
			return nil, fmt.Errorf("score_mod %s: %w", e.typ, err)
		}
		if n.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("score_mod %s encodes as a %v, not a mapping", e.typ, n.Kind)
		}
		typ := []*yaml.Node{{Kind: yaml.ScalarNode, Tag: "!!str", Value: "type"}, {Kind: yaml.ScalarNode, Tag: "!!str", Value: e.typ}}
		n.Content = append(typ, n.Content...)
		n.Style = yaml.FlowStyle
		nodes[i] = &n
	}
	switch {
	case len(nodes) == 0:
		return nil, nil
	case len(nodes) == 1 && !m.list:
		return nodes[0], nil
	}
	return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: nodes, Style: yaml.FlowStyle}, nil
}

// prepare prepares every modification for a layer of the given shape.
func (m ScoreMods) prepare(shape ScoreModShape) error {
	for i, e := range m.entries {
		if err := e.mod.Prepare(shape); err != nil {
			return fmt.Errorf("%s (%s): %w", m.where(i), e.typ, err)
		}
		if withParams, ok := e.mod.(ScoreModParams); ok {
			for _, p := range withParams.Params() {
				if p.Name == "" || p.Value == nil {
					return fmt.Errorf("%s (%s) lists a parameter without a name or a value", m.where(i), e.typ)
				}
			}
		}
	}
	return nil
}

// plan records, with a planning allocator, the parameters of the
// modifications that plan theirs (ScoreModPlanner), under their layer
// names.
func (m ScoreMods) plan(a paramAlloc, shape ScoreModShape) error {
	for i, e := range m.entries {
		planner, ok := e.mod.(ScoreModPlanner)
		if !ok {
			continue
		}
		shapes, err := planner.PlanParams(shape)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", m.where(i), e.typ, err)
		}
		for _, p := range shapes {
			if err := a.plan(m.where(i)+"."+p.Name, p.Shape...); err != nil {
				return err
			}
		}
	}
	return nil
}

// where names modification i in errors and parameter names.
func (m ScoreMods) where(i int) string {
	if m.list {
		return fmt.Sprintf("score_mod.%d", i)
	}
	return "score_mod"
}

// params lists the modifications' parameters under their layer names.
func (m ScoreMods) params() []registry.Param {
	var out []registry.Param
	for i, e := range m.entries {
		if withParams, ok := e.mod.(ScoreModParams); ok {
			for _, p := range withParams.Params() {
				p.Name = m.where(i) + "." + p.Name
				out = append(out, p)
			}
		}
	}
	return out
}

// scoreModsHide reports whether the modifications hide key k from query q
// of sequence b, head h: they give it −Inf for a score of 0.
func scoreModsHide(mods []ScoreMod, b, h, q, k int) bool {
	var s [1]float32
	for _, m := range mods {
		m.Modify(s[:], b, h, q, k)
	}
	return math.IsInf(float64(s[0]), -1)
}
