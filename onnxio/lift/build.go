package lift

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/match"
)

// builder turns recognized regions into a model config.
type builder struct {
	a       *analysis
	p       *plan
	o       Options
	regions []*region
	layers  []*layer
	// inputs are the graph inputs, in order: the model's inputs.
	inputs     []string
	inputNames map[string]string // graph input: config input name
	output     string            // the config's output layer
	outputs    []Output
	// extraUnlifted are graph outputs no layer can produce.
	extraUnlifted []Unlifted
}

// layer is a region with its name and wiring in the config.
type layer struct {
	*region
	name string
	in   []string // config names of the inputs
}

func newBuilder(a *analysis, p *plan, o Options) *builder {
	b := &builder{a: a, p: p, o: o, regions: append([]*region(nil), p.regions...), inputNames: map[string]string{}}
	used := map[string]bool{}
	for i, vi := range a.g.Inputs {
		name := identifier(vi.GetName())
		if name == "" || used[name] {
			name = fmt.Sprintf("input_%d", i)
		}
		used[name] = true
		b.inputs = append(b.inputs, vi.GetName())
		b.inputNames[vi.GetName()] = name
	}
	return b
}

// identifier turns a graph input name into a config input name: letters,
// digits and underscores, not starting with a digit.
func identifier(s string) string {
	var out strings.Builder
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_', r >= '0' && r <= '9' && i > 0:
			out.WriteRune(r)
		case r >= '0' && r <= '9':
			out.WriteString("_" + string(r))
		default:
			out.WriteByte('_')
		}
	}
	return out.String()
}

// fallbackNames is the layer name used when node names suggest none.
var fallbackNames = map[string]string{"attention": "attn", "residual": "add"}

// wire orders the regions, names the layers, resolves every input to a
// model input or an earlier layer, and maps the graph outputs.
func (b *builder) wire() error {
	a, p := b.a, b.p
	a.sortRegions(b.regions)
	names := map[string]bool{}
	for _, n := range b.inputNames {
		names[n] = true
	}
	values := map[string]string{} // graph value: config name
	for v, n := range b.inputNames {
		values[v] = n
	}
	var missing []string
	for _, r := range b.regions {
		name := nameHint(r.nodes)
		if name == "" {
			name = r.kind
			if f, ok := fallbackNames[r.kind]; ok {
				name = f
			}
		}
		base := name
		for k := 2; names[name]; k++ {
			name = fmt.Sprintf("%s_%d", base, k)
		}
		names[name] = true
		l := &layer{region: r, name: name}
		for _, in := range r.inputs {
			v := p.resolve(in)
			n, ok := values[v]
			if !ok {
				missing = append(missing, fmt.Sprintf("layer %s reads %q, which no lifted layer computes", name, v))
				n = "?"
			}
			l.in = append(l.in, n)
		}
		values[r.output] = name
		b.layers = append(b.layers, l)
	}
	for i, o := range a.g.Outputs {
		v := p.resolve(o)
		if i == 0 {
			name, ok := values[v]
			if !ok || b.inputNames[v] != "" {
				return fmt.Errorf("%w (output %q)", errNoOutput, o)
			}
			b.output = name
			b.outputs = append(b.outputs, Output{Name: o, Layer: name})
			continue
		}
		if out, why := b.cacheOutput(o); out != nil || why != "" { // kvcache_run.go: a present output
			if out != nil {
				b.outputs = append(b.outputs, *out)
			} else {
				b.extraUnlifted = append(b.extraUnlifted, Unlifted{Node: o, Op: "graph output", Reason: why})
			}
			continue
		}
		if name, ok := values[v]; ok && b.inputNames[v] == "" { // another layer's output: BERT's pooled output
			b.outputs = append(b.outputs, Output{Name: o, Layer: name})
			continue
		}
		if w, name, ok := b.weightsOf(o); ok {
			kind := "heads"
			if w.mean {
				kind = "mean"
			}
			b.outputs = append(b.outputs, Output{Name: o, Layer: name, Weights: kind})
			continue
		}
		b.extraUnlifted = append(b.extraUnlifted, Unlifted{Node: o, Op: "graph output",
			Reason: fmt.Sprintf("graph output %d %q is computed by no lifted layer, nor is it a layer's attention weights", i, o)})
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s", strings.Join(missing, "; "))
	}
	if len(b.extraUnlifted) > 0 {
		return fmt.Errorf("%d graph output(s) cannot be produced", len(b.extraUnlifted))
	}
	return nil
}

// weightsOf finds the layer whose attention weights a graph output holds.
func (b *builder) weightsOf(o string) (weightsOutput, string, bool) {
	for _, l := range b.layers {
		for _, w := range l.weights {
			if w.output == o {
				return w, l.name, true
			}
		}
	}
	return weightsOutput{}, "", false
}

// merge offers each region whose inputs are all computed by other regions
// that nothing else reads (and that return no attention weights) to the
// layers' merges (match.RegisterMerge), and replaces the regions by the
// layer the first one returns. It runs before wire.
func (b *builder) merge() {
	ms := match.Merges()
	byOutput := map[string]*region{}
	for _, r := range b.regions {
		byOutput[r.output] = r
	}
	var out []*region
	drop := map[*region]bool{}
	for _, r := range b.regions {
		if len(ms) == 0 || len(r.inputs) < 2 {
			continue
		}
		var inner []*region
		for _, in := range r.inputs {
			h := byOutput[b.p.resolve(in)]
			if h == nil || len(h.weights) > 0 || !b.readOnlyBy(h.output, r) {
				inner = nil
				break
			}
			inner = append(inner, h)
		}
		if inner == nil {
			continue
		}
		if w := b.merged(ms, r, inner); w != nil {
			for _, h := range inner {
				w.nodes = append(w.nodes, h.nodes...)
				drop[h] = true
			}
			w.nodes = uniqueNodes(append(w.nodes, r.nodes...))
			drop[r] = true
			out = append(out, w)
		}
	}
	for _, r := range b.regions {
		if !drop[r] {
			out = append(out, r)
		}
	}
	if len(drop) > 0 {
		b.regions = out
	}
}

// merged returns the region of the first merge that joins outer and
// inner, or nil.
func (b *builder) merged(ms []match.Merge, outer *region, inner []*region) *region {
	views := make([]*match.Layer, len(inner))
	for i, h := range inner {
		views[i] = h.public()
	}
	for _, m := range ms {
		l := runMerge(m, outer.public(), views)
		if l == nil {
			continue
		}
		kind := l.Name
		if kind == "" {
			kind = sanitize(l.Type)
		}
		w := &region{typ: l.Type, kind: kind, inputs: slices.Clone(l.Inputs), output: outer.output}
		var err error
		if w.fields, err = fieldsOf(l); err != nil {
			continue
		}
		if w.params, err = b.a.paramsOf(l); err != nil {
			continue
		}
		return w
	}
	return nil
}

// runMerge runs a merge, a panic in it counting as no merge.
func runMerge(m match.Merge, outer *match.Layer, inner []*match.Layer) (l *match.Layer) {
	defer func() {
		if recover() != nil {
			l = nil
		}
	}()
	return m.Merge(outer, inner)
}

// public is the region as a pattern layer: what merges see of it.
func (r *region) public() *match.Layer {
	l := &match.Layer{Type: r.typ, Name: r.kind, Inputs: slices.Clone(r.inputs), Output: r.output,
		Params: publicParams(r.params), Notes: slices.Clone(r.notes)}
	for _, f := range r.fields {
		l.Config = append(l.Config, match.Field{Key: f.key, Value: f.value})
	}
	return l
}

// readOnlyBy reports whether v is read only by region r's nodes.
func (b *builder) readOnlyBy(v string, r *region) bool {
	if b.a.g.IsOutput(v) {
		return false
	}
	for _, c := range b.a.readers(v) {
		found := false
		for _, n := range r.nodes {
			found = found || n == c
		}
		if !found {
			return false
		}
	}
	return true
}

// liftedConfig is a lifted model config as Go values; config marshals it
// with package yaml, which models.Parse reads back.
type liftedConfig struct {
	Name        string        `yaml:"name"`
	Description string        `yaml:"description"`
	Inputs      []any         `yaml:"inputs,flow"` // a name, or a typedInput
	Output      string        `yaml:"output,omitempty"`
	Layers      []layerConfig `yaml:"layers"`
}

// typedInput is a model input that is not float32: int64 ids and masks.
type typedInput struct {
	Name  string `yaml:"name"`
	Dtype string `yaml:"dtype"`
}

// layerConfig is one layer of a lifted config: its keys in order (name,
// type, inputs, then the layer's fields), written as a flow mapping so
// that each layer reads as one line.
type layerConfig []field

// MarshalYAML encodes the layer as a flow mapping, each value as package
// yaml encodes it (a float32 at float32 precision).
func (l layerConfig) MarshalYAML() (any, error) {
	m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	for _, f := range l {
		var k, v yaml.Node
		if err := k.Encode(f.key); err != nil {
			return nil, err
		}
		if err := v.Encode(f.value); err != nil {
			return nil, fmt.Errorf("field %s: %w", f.key, err)
		}
		m.Content = append(m.Content, &k, &v)
	}
	return m, nil
}

// config builds the model config as Go values.
func (b *builder) config() liftedConfig {
	name := b.o.Name
	if name == "" {
		name = "lifted"
	}
	m := b.a.g.Model
	producer := strings.TrimSpace(m.GetProducerName() + " " + m.GetProducerVersion())
	if producer == "" {
		producer = "unknown producer"
	}
	c := liftedConfig{
		Name:        name,
		Description: fmt.Sprintf("lifted from ONNX (%s, opset %d) by attnrun import", producer, b.a.g.Opset),
		Inputs:      []any{},
		Output:      b.output,
	}
	for _, v := range b.inputs {
		if t := b.a.g.inputType(v); t == onnxio.Int64 || t == onnxio.Int32 { // int32 ids and masks are taken as int64
			c.Inputs = append(c.Inputs, typedInput{Name: b.inputNames[v], Dtype: "int64"})
			continue
		}
		c.Inputs = append(c.Inputs, b.inputNames[v])
	}
	previous := ""
	if len(b.inputs) > 0 {
		previous = b.inputNames[b.inputs[0]]
	}
	for _, l := range b.layers {
		lc := layerConfig{{"name", l.name}, {"type", l.typ}}
		if len(l.in) != 1 || l.in[0] != previous {
			lc = append(lc, field{"inputs", l.in})
		}
		c.Layers = append(c.Layers, append(lc, l.fields...))
		previous = l.name
	}
	return c
}

// yaml writes the model config, two spaces per level.
func (b *builder) yaml() (string, error) {
	var s strings.Builder
	enc := yaml.NewEncoder(&s)
	enc.SetIndent(2)
	if err := enc.Encode(b.config()); err != nil {
		return "", fmt.Errorf("the lifted config does not marshal: %w", err)
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	return s.String(), nil
}

// stateDict gathers the layers' parameters under their model names and
// the mapping table in the model's parameter order.
func (b *builder) stateDict(m *models.Model) (map[string]*tensor.Dense, []Mapping) {
	dict := map[string]*tensor.Dense{}
	from := map[string]param{}
	for _, l := range b.layers {
		for _, p := range l.params {
			name := l.name + "." + p.name
			dict[name] = p.value
			from[name] = p
		}
	}
	var table []Mapping
	for _, mp := range m.Params() {
		if p, ok := from[mp.Name]; ok {
			table = append(table, b.a.mapping(mp.Name, p)...)
		}
	}
	return dict, table
}

// ModelInput converts a graph input to what a lifted model takes: int64
// as it is and int32 as int64 (ids and attention masks: the model declares
// such inputs int64), everything else as float32, booleans (a key_padding_mask) as 0
// and 1.
func ModelInput(t *tensor.Dense) (*tensor.Dense, error) {
	switch t.Dtype() {
	case tensor.Int64:
		return t.Clone().(*tensor.Dense), nil
	case tensor.Int32:
		ids := make([]int64, t.Shape().TotalSize())
		for i, v := range t.Data().([]int32) {
			ids[i] = int64(v)
		}
		if t.IsScalar() {
			return tensor.New(tensor.FromScalar(ids[0])), nil
		}
		return tensor.New(tensor.WithShape(t.Shape().Clone()...), tensor.WithBacking(ids)), nil
	}
	f, err := match.Floats(t)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(f))
	for i, v := range f {
		out[i] = float32(v)
	}
	shape := []int(t.Shape().Clone())
	if t.IsScalar() {
		return tensor.New(tensor.FromScalar(out[0])), nil
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(out)), nil
}
