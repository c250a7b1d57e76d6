package export

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	ir "github.com/attnrun/attnrun/onnxio/graph"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// The metadata_props an attnrun export carries, so that an importer can
// rebuild the model losslessly: the YAML config it was built from, and the
// version of this metadata format. An importer refuses versions it does not
// know.
const (
	// MetadataConfig is the key of the model's YAML config.
	MetadataConfig = "attnrun.config"
	// MetadataVersion is the key of the metadata format version.
	MetadataVersion = "attnrun.version"
	// MetadataFormat is the metadata format version this package writes.
	MetadataFormat = "1"
)

// The opsets Model writes: the default operator set versions whose
// standard ops cover every built-in layer.
const (
	// DefaultOpset is the opset Model targets when none is given.
	DefaultOpset = 17
	// MinOpset is the oldest opset Model writes.
	MinOpset = 13
	// MaxOpset is the newest opset Model writes. Opset 25 gave the
	// Attention op sliding windows, which attention.sdpa's window uses;
	// opset 27 added LinearAttention, which attention.linear exports as
	// from that opset on. ONNX Runtime 1.31 refuses opsets 26 and 27, so
	// exports there are checked on attnrun's executor alone.
	MaxOpset = 27
	// AttentionOpset is the first opset with the Attention and
	// RotaryEmbedding ops: from it on, the attention layers that map onto
	// them (attention.sdpa, attention.torch_mha, position.rope, ...) export
	// as those ops instead of their decomposition into MatMul and Softmax.
	AttentionOpset = 23
)

// exportIRVersion is the ONNX IR version of an export at an opset: the
// version each opset was released with, so that a runtime that reads the
// opset reads the file. IR 8 (opsets 13 to 18) is also what python3-onnx
// 1.12's checker accepts; opset 23 and later are written with IR 10,
// which ONNX Runtime 1.30 reads.
func exportIRVersion(opset int) int64 {
	switch {
	case opset <= 18:
		return 8
	case opset <= 20:
		return 9
	}
	return 10
}

// OutputName is the name of an export's graph output.
const OutputName = "y"

// Options configures Model.
type Options struct {
	// Opset is the default-domain opset to target, MinOpset to
	// MaxOpset; 0 means DefaultOpset.
	Opset int
	// Widths fixes the last axis of model inputs, by input name. An input
	// not listed gets the one width the model accepts among its parameters'
	// sizes (found by running the model on one token of each); when no
	// single width fits (a model without parameters accepts any), the axis
	// stays symbolic ("d").
	Widths map[string]int
	// Interface, when set, declares the graph's inputs and output as
	// given instead of as (batch, seq, d) and "y", the graph adapting them
	// to what the layers read (see Interface).
	Interface *Interface
	// Preview lets layers write ops of ONNX's ai.onnx.preview domain
	// (version 1) where they have them (registry.DomainBuilder):
	// attention.sdpa's attention becomes FlexAttention, its score_mod a
	// subgraph. ONNX Runtime 1.31 does not run these ops; attnrun's
	// executor does.
	Preview bool
}

// PreviewDomain is ONNX's domain of experimental operators, which
// Options.Preview allows.
const PreviewDomain = "ai.onnx.preview"

// Model writes a model as an ONNX graph of standard ops, each layer
// through its registry.Exporter; a layer that does not implement it is an
// error naming the layer and its type.
//
// The graph's inputs carry the model's input names, float32 of shape
// (batch, seq, d) with batch and seq symbolic and d fixed when known (see
// Options.Widths); an input a layer reads as an attention mask is
// float32 of the rank that layer declares (see MaskInputs), bool masks
// given as 0 and 1, since models take float32 tensors only. Its output is
// "y", shaped (batch, seq, width) (in the order of the output layer's
// input, for a sequence-first nn.MultiheadAttention). Exports are
// batched: a caller with a (T, d) tensor feeds it as (1, T, d), which is
// what attnrun's layers compute for it. Sequences may be as long as the
// model accepts: beyond the context_length of a causal layer or a position
// embedding the graph fails, as attnrun does (a non-causal
// attention.multihead has nothing that depends on its context_length in
// the graph, and accepts longer sequences).
//
// With Options.Interface, the inputs and the output are declared as
// it says instead (another file's, for a drop-in replacement), and the
// graph adapts them to the layers.
//
// Every parameter becomes an initializer under its model name
// ("attn.W_query.weight") in PyTorch's layout, nn.Linear weights (out, in),
// transposed by a Transpose node where the math needs it. Masks are computed
// from the sequence length (Shape, Range, Greater), never stored as bool
// tensors, so exports also decode in onnx-go. From AttentionOpset on, the
// attention layers that map onto the Attention op use it (see each layer's
// ExportONNX). Dropout is exported as at
// inference: the identity. metadata_props carry the model's YAML config
// (MetadataConfig) and the metadata version (MetadataVersion); the producer
// is "attnrun".
//
// The same model and options always give the same ModelProto, and
// EncodeModel the same bytes.
func Model(m *models.Model, opts Options) (*onnxpb.ModelProto, error) {
	if m == nil {
		return nil, fmt.Errorf("export: nil model")
	}
	cfg := m.Config()
	if len(cfg.YAML) == 0 {
		// The metadata must rebuild the model; a config assembled in code
		// has no text to carry.
		return nil, fmt.Errorf("export model %q: the config has no YAML text (models.Config.YAML) for the %s metadata; build the model with models.Parse or models.Load", cfg.Name, MetadataConfig)
	}
	opset := opts.Opset
	if opset == 0 {
		opset = DefaultOpset
	}
	if opset < MinOpset || opset > MaxOpset {
		return nil, fmt.Errorf("export model %q: opset %d is not supported (attnrun exports opsets %d to %d)",
			cfg.Name, opset, MinOpset, MaxOpset)
	}
	layouts, err := inputLayouts(cfg)
	if err != nil {
		return nil, fmt.Errorf("export model %q: %w", cfg.Name, err)
	}
	widths, err := inputWidths(m, opts.Widths, layouts)
	if err != nil {
		return nil, fmt.Errorf("export model %q: %w", cfg.Name, err)
	}

	g := newGraph(opset)
	if opts.Preview {
		g.domains[PreviewDomain] = 1
	}
	g.probed = probeOutput(m, widths, layouts)
	values, err := g.declareInputs(m, opts.Interface, widths, layouts)
	if err != nil {
		return nil, fmt.Errorf("export model %q: %w", cfg.Name, err)
	}
	for i := range cfg.Layers {
		spec := &cfg.Layers[i]
		out, err := g.exportLayer(spec, values)
		if err != nil {
			return nil, fmt.Errorf("export model %q: layer %q (%s): %w", cfg.Name, spec.Name, spec.Type, err)
		}
		values[spec.Name] = out
	}

	inputs, output, err := g.declareOutput(cfg, opts.Interface, values[cfg.Output], widths, layouts)
	if err != nil {
		return nil, fmt.Errorf("export model %q: %w", cfg.Name, err)
	}
	initializers, err := paramInitializers(m)
	if err != nil {
		return nil, fmt.Errorf("export model %q: %w", cfg.Name, err)
	}
	model := &onnxpb.ModelProto{
		IrVersion:    proto.Int64(exportIRVersion(opset)),
		ProducerName: proto.String("attnrun"),
		OpsetImport:  g.opsetImports(),
		Graph: &onnxpb.GraphProto{
			Name:        proto.String(cfg.Name),
			Node:        g.nodes,
			Initializer: initializers,
			Input:       inputs,
			Output:      []*onnxpb.ValueInfoProto{output},
		},
	}
	if cfg.Description != "" {
		model.Graph.DocString = proto.String(cfg.Description)
	}
	onnxio.SetMetadata(model, MetadataConfig, string(cfg.YAML))
	onnxio.SetMetadata(model, MetadataVersion, MetadataFormat)
	return model, nil
}

// exportLayer adds one layer's nodes and returns the value holding its
// output; it also records the output's width for the layers that follow.
func (g *graph) exportLayer(spec *models.LayerSpec, values map[string]string) (string, error) {
	exporter, ok := spec.Layer.(registry.Exporter)
	if !ok {
		return "", fmt.Errorf("cannot be exported to ONNX: %T does not implement registry.Exporter", spec.Layer)
	}
	inputs := make([]string, len(spec.Inputs))
	probes := make([]*tensor.Dense, len(spec.Inputs))
	own := ownLayouts(spec)
	for i, in := range spec.Inputs {
		inputs[i] = values[in]
		if dims, ok := own[i]; ok {
			probes[i] = layoutProbe(dims)
		} else if g.ids[inputs[i]] {
			probes[i] = idsProbe()
		} else if w := g.widths[inputs[i]]; w > 0 {
			probes[i] = zeroToken(w)
		}
	}
	b := newLayerBuilder(g, spec, inputs)
	out, err := callExporter(exporter, b, inputs)
	if err == nil {
		err = b.err
	}
	if err != nil {
		return "", err
	}
	if out == "" {
		return "", fmt.Errorf("ExportONNX returned no output value")
	}
	if !g.defined(out) {
		return "", fmt.Errorf("ExportONNX returned %q, which no node produces and which is not one of its inputs", out)
	}
	if w := probeLayer(spec, probes); w > 0 {
		g.widths[out] = w
	}
	return out, nil
}

// callExporter runs a layer's ExportONNX, turning a panic (a bug in a
// layer, perhaps someone else's) into an error.
func callExporter(e registry.Exporter, b *layerBuilder, inputs []string) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("panic in ExportONNX: %v", r)
		}
	}()
	return e.ExportONNX(b, slices.Clone(inputs))
}

// declareInputs names the values that hold the model's inputs for the
// layers: the inputs themselves, or with an Interface the values adapted
// from the declared inputs. Every graph input and parameter name is
// reserved, so that no node writes over one.
func (g *graph) declareInputs(m *models.Model, iface *Interface, widths map[string]int, layouts map[string][]string) (map[string]string, error) {
	cfg := m.Config()
	params := m.Params()
	values := map[string]string{} // model input or layer name -> ONNX value
	if iface == nil {
		for i, in := range cfg.Inputs {
			values[in] = in
			g.reserve(in)
			g.widths[in] = widths[in]
			g.ids[in] = cfg.InputDtype(i) == tensor.Int64
		}
		for _, p := range params {
			g.reserve(p.Name)
		}
		return values, nil
	}
	if err := checkInterface(iface, cfg, params); err != nil {
		return nil, err
	}
	for _, p := range params {
		g.reserve(p.Name)
	}
	for _, vi := range iface.Inputs {
		g.reserve(vi.GetName())
	}
	g.reserve(iface.Output.GetName())
	for i, in := range cfg.Inputs {
		if cfg.InputDtype(i) == tensor.Int64 {
			v, err := g.adaptIDs(iface.Inputs[i])
			if err != nil {
				return nil, fmt.Errorf("interface: %w", err)
			}
			values[in], g.ids[v] = v, true
			continue
		}
		dims := layouts[in]
		if dims == nil {
			dims = tokenDims
		}
		v, err := g.adaptInput(iface.Inputs[i], dims)
		if err != nil {
			return nil, fmt.Errorf("interface: %w", err)
		}
		values[in] = v
		g.widths[v] = widths[in]
	}
	return values, nil
}

// declareOutput makes value the graph's output and returns the graph's
// input and output declarations: attnrun's own (see inputInfos and
// outputInfo), or with an Interface its declarations, value adapted to
// the declared output.
func (g *graph) declareOutput(cfg *models.Config, iface *Interface, value string, widths map[string]int, layouts map[string][]string) ([]*onnxpb.ValueInfoProto, *onnxpb.ValueInfoProto, error) {
	dims := outputLayout(cfg, layouts)
	if iface == nil {
		name := outputName(cfg.Inputs)
		g.nameOutput(value, name)
		if width, ok := g.pooledWidth(); ok {
			return inputInfos(cfg, widths, layouts), outputInfo(name, pooledDims, len(cfg.Inputs), width), nil
		}
		return inputInfos(cfg, widths, layouts), outputInfo(name, dims, len(cfg.Inputs), g.widths[name]), nil
	}
	if err := g.adaptOutput(value, iface.Output, dims); err != nil {
		return nil, nil, fmt.Errorf("interface: %w", err)
	}
	return clonedInfos(iface.Inputs), clonedInfos([]*onnxpb.ValueInfoProto{iface.Output})[0], nil
}

// outputName is OutputName, or OutputName_N when a model input already has
// that name.
func outputName(inputs []string) string {
	name := OutputName
	for i := 1; slices.Contains(inputs, name); i++ {
		name = fmt.Sprintf("%s_%d", OutputName, i)
	}
	return name
}

// nameOutput makes value the graph output called name: the node producing
// it is renamed, or an Identity added when value is a graph input or the
// output of no node.
func (g *graph) nameOutput(value, name string) {
	if value == name {
		return
	}
	if !g.produced[value] {
		g.addNode("Identity", "/Identity", []string{value}, []string{name}, nil)
		g.widths[name] = g.widths[value]
		return
	}
	ir.RenameValue(g.nodes, value, name)
	g.widths[name] = g.widths[value]
}

// paramInitializers stores every model parameter under its model name, in
// model order.
func paramInitializers(m *models.Model) ([]*onnxpb.TensorProto, error) {
	params := m.Params()
	out := make([]*onnxpb.TensorProto, len(params))
	for i, p := range params {
		tp, err := onnxio.DenseToTensor(p.Name, p.Value)
		if err != nil {
			return nil, fmt.Errorf("parameter %q: %w", p.Name, err)
		}
		out[i] = tp
	}
	return out, nil
}

// idsInfo declares an int64 input (token ids, positions, an integer mask):
// (batch, seq), the first input's sequence axis "seq" and another's
// suffixed with its name, as token streams' are.
func idsInfo(name string, index int) *onnxpb.ValueInfoProto {
	seq := "seq"
	if index > 0 {
		seq = "seq_" + name
	}
	return onnxio.TensorValueInfo(name, onnxio.Int64, []onnxio.Dim{onnxio.SymbolicDim("batch"), onnxio.SymbolicDim(seq)})
}

// inputInfos declares the graph inputs: float32 (batch, seq, d), int64
// (batch, seq) for the inputs the config declares int64. The first
// input's axes are "seq" and "d"; another input's are suffixed with its
// name, since a second input (cross-attention memory) may differ in length.
// An input a layer reads otherwise (see registry.InputDims) has the dimensions that
// layer gives: a mask its own, a token stream its axes in its order.
func inputInfos(cfg *models.Config, widths map[string]int, layouts map[string][]string) []*onnxpb.ValueInfoProto {
	inputs := cfg.Inputs
	infos := make([]*onnxpb.ValueInfoProto, len(inputs))
	for i, in := range inputs {
		if cfg.InputDtype(i) == tensor.Int64 {
			infos[i] = idsInfo(in, i)
			if dims := layouts[in]; len(dims) == 1 { // one per sequence (mask.lengths)
				infos[i] = onnxio.TensorValueInfo(in, onnxio.Int64, []onnxio.Dim{onnxio.SymbolicDim(dims[0])})
			}
			continue
		}
		dims := layouts[in]
		if isOwnLayout(dims) {
			infos[i] = layoutInfo(in, dims)
			continue
		}
		if dims == nil {
			dims = tokenDims
		}
		seq, d := "seq", "d"
		if i > 0 {
			seq, d = "seq_"+in, "d_"+in
		}
		width := onnxio.SymbolicDim(d)
		if w := widths[in]; w > 0 {
			width = onnxio.FixedDim(int64(w))
		}
		axes := map[string]onnxio.Dim{"batch": onnxio.SymbolicDim("batch"), "seq": onnxio.SymbolicDim(seq), "d": width}
		shape := make([]onnxio.Dim, len(dims))
		for k, name := range dims {
			shape[k] = axes[name]
		}
		infos[i] = onnxio.TensorValueInfo(in, onnxio.Float, shape)
	}
	return infos
}

// outputInfo declares the graph output: (batch, seq, width), its axes in
// the order of the output layer (dims). Its sequence axis is the input's
// for a one-input model and left unnamed otherwise (it may follow any
// input); its width is fixed when the export knows it.
func outputInfo(name string, dims []string, inputs int, width int) *onnxpb.ValueInfoProto {
	seq := onnxio.Dim{}
	if inputs == 1 {
		seq = onnxio.SymbolicDim("seq")
	}
	d := onnxio.Dim{}
	if width > 0 {
		d = onnxio.FixedDim(int64(width))
	}
	axes := map[string]onnxio.Dim{"batch": onnxio.SymbolicDim("batch"), "seq": seq, "d": d}
	shape := make([]onnxio.Dim, len(dims))
	for k, axis := range dims {
		shape[k] = axes[axis]
	}
	return onnxio.TensorValueInfo(name, onnxio.Float, shape)
}

// quoteNames lists names for an error message.
func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// opsetImports lists the default domain at the export's opset, then the
// other domains the nodes use, sorted.
func (g *graph) opsetImports() []*onnxpb.OperatorSetIdProto {
	imports := []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(int64(g.opset))}}
	for _, d := range slices.Sorted(maps.Keys(g.used)) {
		imports = append(imports, &onnxpb.OperatorSetIdProto{Domain: proto.String(d), Version: proto.Int64(int64(g.domains[d]))})
	}
	return imports
}
