package lift

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/export"
	ir "github.com/attnrun/attnrun/onnxio/graph"
	"github.com/attnrun/attnrun/onnxio/match"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// MetadataOutputs is the metadata key of an attnrun file listing what each
// of the lifted model's outputs is (YAML, a list of Output), written when
// the model returns more than its output: the attention weights a PyTorch
// graph returned beside it (nn.MultiheadAttention's need_weights). Without
// it, the model's output is the graph's only output. The model config and
// its version are under export.MetadataConfig and export.MetadataVersion.
const MetadataOutputs = "attnrun.outputs"

// IsAttnrun reports whether a model was written by attnrun: it carries the
// model config in its metadata (export.MetadataConfig).
func IsAttnrun(m *onnxpb.ModelProto) bool {
	_, ok := onnxio.Metadata(m, export.MetadataConfig)
	return ok
}

// Load builds the attnrun model an attnrun-written ONNX file holds, with
// its weights, exactly: the config from the metadata, every parameter from
// the initializer of the same name. An unknown format version is refused.
// The model is built within budget.DefaultLimit; LoadWith takes options.
func Load(m *onnxpb.ModelProto) (*models.Model, []Output, error) {
	return LoadWith(m, models.Options{})
}

// LoadWith is Load with the options the model is built with: its memory
// budget bounds the parameters the metadata's config asks for before any is
// allocated. Each parameter is then read from its initializer, checked
// against the shape the config gives it, and copied, one at a time.
func LoadWith(m *onnxpb.ModelProto, opts models.Options) (*models.Model, []Output, error) {
	version, ok := onnxio.Metadata(m, export.MetadataVersion)
	if !ok {
		return nil, nil, fmt.Errorf("the file has %s but no %s: not a file attnrun wrote", export.MetadataConfig, export.MetadataVersion)
	}
	if version != export.MetadataFormat {
		return nil, nil, fmt.Errorf("attnrun format version %q is not supported (this attnrun reads version %q); use a newer attnrun", version, export.MetadataFormat)
	}
	text, _ := onnxio.Metadata(m, export.MetadataConfig)
	opts.ShapesOnly = false
	model, err := opts.Parse([]byte(text), "metadata "+export.MetadataConfig)
	if err != nil {
		return nil, nil, err
	}
	inits := map[string]*onnxpb.TensorProto{}
	for _, t := range m.GetGraph().GetInitializer() {
		inits[t.GetName()] = t
	}
	for _, p := range model.Params() {
		if err := loadParam(p, inits[p.Name], model.Name()); err != nil {
			return nil, nil, err
		}
	}
	// The parameters now hold the file's weights; loading them as a state
	// dict (each onto itself) records that the model has weights.
	if _, own := model.StateDict(); len(own) > 0 {
		if err := model.LoadStateDict(own); err != nil {
			return nil, nil, fmt.Errorf("initializers: %w", err)
		}
	}
	outputs, err := metaOutputs(m, model)
	if err != nil {
		return nil, nil, err
	}
	return model, outputs, nil
}

// loadParam copies the initializer t into the parameter p, after checking
// its shape from the declared dims, before converting anything.
func loadParam(p registry.Param, t *onnxpb.TensorProto, model string) error {
	if t == nil {
		return fmt.Errorf("parameter %q of model %q has no initializer of that name", p.Name, model)
	}
	want := p.Value.Shape()
	dims := t.GetDims()
	same := len(dims) == len(want)
	for i := 0; same && i < len(dims); i++ {
		same = dims[i] == int64(want[i])
	}
	if !same {
		return fmt.Errorf("initializers: parameter %q has shape %v, model %q expects %s", p.Name, dims, model, models.FormatShape(want))
	}
	d, err := onnxio.TensorToDense(t)
	if err != nil {
		return fmt.Errorf("initializer %q: %w", p.Name, err)
	}
	data := p.Value.Data().([]float32)
	switch values := d.Data().(type) {
	case []float32:
		if len(values) == len(data) {
			copy(data, values)
			return nil
		}
	case []float64:
		if len(values) == len(data) {
			for i, v := range values {
				data[i] = float32(v)
			}
			return nil
		}
	default:
		return fmt.Errorf("initializers: parameter %q is %v, want float32 or float64", p.Name, d.Dtype())
	}
	return fmt.Errorf("initializers: parameter %q holds %d values, want %d", p.Name, d.Shape().TotalSize(), len(data))
}

// metaOutputs reads MetadataOutputs, or makes the single graph output the
// model's output.
func metaOutputs(m *onnxpb.ModelProto, model *models.Model) ([]Output, error) {
	text, ok := onnxio.Metadata(m, MetadataOutputs)
	if !ok {
		name := "output"
		if outs := m.GetGraph().GetOutput(); len(outs) > 0 {
			name = outs[0].GetName()
		}
		return []Output{{Name: name, Layer: model.Config().Output}}, nil
	}
	var outs []Output
	if err := yaml.Unmarshal([]byte(text), &outs); err != nil {
		return nil, fmt.Errorf("metadata %s: %w", MetadataOutputs, err)
	}
	for _, o := range outs {
		if o.Weights != "" && o.Weights != "heads" && o.Weights != "mean" {
			return nil, fmt.Errorf("metadata %s: output %q has unknown weights kind %q", MetadataOutputs, o.Name, o.Weights)
		}
	}
	return outs, nil
}

// loadResult is Lift for a file attnrun wrote: nothing to recognize. The
// model is built within opts.MaxMemory.
func loadResult(m *onnxpb.ModelProto, opts models.Options) (*Result, error) {
	model, outputs, err := LoadWith(m, opts)
	if err != nil {
		return nil, fmt.Errorf("lift: %w", err)
	}
	names, dict := model.StateDict()
	binds, err := ReadParamInputs(m)
	if err != nil {
		return nil, fmt.Errorf("lift: %w", err)
	}
	res := &Result{Config: string(model.Config().YAML), Model: model, StateDict: dict, Outputs: outputs, ParamInputs: binds, Attnrun: true}
	for _, n := range names {
		res.Mapping = append(res.Mapping, Mapping{Initializer: n, Param: n})
	}
	return res, nil
}

// SetOutputs records in a model's metadata what the lifted model's outputs
// are, when it has more than its one output (attention weights the source
// graph returned beside it). Load reads them back.
func SetOutputs(m *onnxpb.ModelProto, outputs []Output) error {
	if len(outputs) <= 1 {
		return nil
	}
	data, err := yaml.Marshal(outputs)
	if err != nil {
		return err
	}
	onnxio.SetMetadata(m, MetadataOutputs, string(data))
	return nil
}

// Annotate writes a lifted model into a copy of the graph it was lifted
// from, for models whose layers cannot all be exported as ONNX: the nodes
// stay (any runtime still runs the graph), the parameters are added as
// initializers under their model names, and the metadata makes attnrun load
// the model from them, exactly. A source value that has a parameter's name
// but other contents is renamed (suffix "__source").
func Annotate(src *onnxpb.ModelProto, res *Result) (*onnxpb.ModelProto, error) {
	if res == nil || res.Model == nil {
		return nil, fmt.Errorf("annotate: no lifted model")
	}
	m := proto.Clone(src).(*onnxpb.ModelProto)
	g := m.GetGraph()
	inits := map[string]*onnxpb.TensorProto{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = t
	}
	produced := map[string]bool{}
	for _, n := range g.GetNode() {
		for _, o := range n.GetOutput() {
			produced[o] = true
		}
	}
	reserved := map[string]bool{}
	for _, vi := range append(slices.Clone(g.GetInput()), g.GetOutput()...) {
		if inits[vi.GetName()] == nil {
			reserved[vi.GetName()] = true
		}
	}
	names, dict := res.Model.StateDict()
	for _, name := range names {
		tp, err := onnxio.DenseToTensor(name, dict[name])
		if err != nil {
			return nil, fmt.Errorf("annotate: parameter %q: %w", name, err)
		}
		if reserved[name] {
			return nil, fmt.Errorf("annotate: parameter %q has the name of a graph input or output", name)
		}
		if old := inits[name]; old != nil {
			if sameTensor(old, tp) {
				continue
			}
			renameValue(g, name, name+"__source")
		} else if produced[name] {
			renameValue(g, name, name+"__source")
		}
		g.Initializer = append(g.Initializer, tp)
	}
	onnxio.SetMetadata(m, export.MetadataConfig, res.Config)
	onnxio.SetMetadata(m, export.MetadataVersion, export.MetadataFormat)
	if err := SetOutputs(m, res.Outputs); err != nil {
		return nil, err
	}
	if err := SetParamInputs(m, res.ParamInputs); err != nil {
		return nil, err
	}
	return m, nil
}

// sameTensor compares two tensors' shapes and values.
func sameTensor(a, b *onnxpb.TensorProto) bool {
	da, err1 := onnxio.TensorToDense(a)
	db, err2 := onnxio.TensorToDense(b)
	if err1 != nil || err2 != nil || !da.Shape().Eq(db.Shape()) {
		return false
	}
	fa, err1 := match.Floats(da)
	fb, err2 := match.Floats(db)
	return err1 == nil && err2 == nil && slices.Equal(fa, fb)
}

// renameValue renames a value (initializer, node output, node inputs)
// throughout a graph.
func renameValue(g *onnxpb.GraphProto, from, to string) {
	for _, t := range g.GetInitializer() {
		if t.GetName() == from {
			t.Name = proto.String(to)
		}
	}
	for _, vi := range g.GetInput() {
		if vi.GetName() == from {
			vi.Name = proto.String(to)
		}
	}
	ir.RenameValue(g.GetNode(), from, to)
}
